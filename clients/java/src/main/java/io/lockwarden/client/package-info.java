/**
 * A client for the lockwarden agent's Unix socket (docs/protocol.md, docs/elections.md).
 *
 * <p>Start with {@link io.lockwarden.client.Client}: {@code Client.connect()} opens a session;
 * {@code acquire} returns a {@link io.lockwarden.client.Lock} (a mutex, a read or write hold, a
 * semaphore's permit or a detached lease, per {@link io.lockwarden.client.AcquireOptions});
 * {@code campaign} a {@link io.lockwarden.client.Leadership}; {@code observe} an {@link
 * io.lockwarden.client.Observation}. Failures are {@link io.lockwarden.client.LockException}s
 * with the agent's {@link io.lockwarden.client.ErrorCode}.
 */
package io.lockwarden.client;
