package io.lockwarden.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** What needs no agent: error codes, a socket nobody listens on. */
class ApiTest {
  @Test
  void errorCodesKeepTheWireString() {
    for (ErrorCode c : ErrorCode.values()) {
      if (c != ErrorCode.UNKNOWN) assertEquals(c, ErrorCode.fromWire(c.wireName()));
    }
    assertEquals(ErrorCode.NO_QUORUM, ErrorCode.fromWire("no_quorum"));
    LockException e = new LockException("brand_new", "a code of a later agent");
    assertEquals(ErrorCode.UNKNOWN, e.code());
    assertEquals("brand_new", e.rawCode());
    assertEquals("a code of a later agent", e.agentMessage());
    assertEquals("brand_new: a code of a later agent", e.getMessage());
  }

  @Test
  void connectingToNoAgentFails() throws Exception {
    Path dir = Files.createTempDirectory("lockwarden-java");
    try {
      assertThrows(IOException.class, () -> Client.connect(dir.resolve("none.sock")));
    } finally {
      Files.delete(dir);
    }
  }
}
