/**
 * The lockwarden client: Redlock locks, semaphores, read-write locks, elections and detached
 * leases through the lockwarden agent's Unix socket. Needs nothing but {@code java.base}.
 */
module io.lockwarden.client {
  exports io.lockwarden.client;
}
