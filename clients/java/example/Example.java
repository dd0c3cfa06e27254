import io.lockwarden.client.AcquireOptions;
import io.lockwarden.client.Client;
import io.lockwarden.client.Lock;
import io.lockwarden.client.LockException;
import java.time.Duration;

/**
 * Takes a lock, works under it, and says what happened. Run it against an agent:
 * {@code java -cp lockwarden-client-0.2.0.jar Example.java} (clients/java/README.md).
 */
public class Example {
  public static void main(String[] args) throws Exception {
    AcquireOptions options = AcquireOptions.builder()
        .ttl(Duration.ofSeconds(10)).waitFor(Duration.ofSeconds(5)).renew(true).build();
    try (Client client = Client.connect(); // $LOCKWARDEN_SOCKET, else the default path
         Lock lock = client.acquire("example/report", options)) {
      System.out.println("holding " + lock.resource() + ", valid for " + lock.validity());
      for (int step = 0; step < 3; step++) {
        lock.check(); // throws LockException with code LOST once the lock is lost
        Thread.sleep(100); // the protected work
      }
      System.out.println("done; releasing");
    } catch (LockException e) {
      switch (e.code()) {
        case TIMEOUT -> System.out.println("busy: someone else held it for all 5 s");
        case NO_QUORUM -> System.out.println("the lock service cannot decide now: retry later");
        default -> throw e;
      }
    }
  }
}
