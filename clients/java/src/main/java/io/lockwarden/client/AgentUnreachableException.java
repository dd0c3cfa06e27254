package io.lockwarden.client;

import java.io.IOException;
import java.nio.file.Path;

/**
 * {@link Client#connect(Path)} could not connect to the agent: its message names the socket it
 * tried, as {@code cannot connect to the lockwarden agent at /run/lockwarden/lockwarden.sock: No
 * such file or directory}, and its cause is the socket's own error.
 */
public class AgentUnreachableException extends IOException {
  private static final long serialVersionUID = 1L;

  /** The socket tried. */
  private final transient Path socket;

  /**
   * The connect to {@code socket} failed with {@code cause}.
   *
   * @param socket the agent's socket path that was tried
   * @param cause the socket's error
   */
  public AgentUnreachableException(Path socket, IOException cause) {
    super("cannot connect to the lockwarden agent at " + socket + ": " + cause.getMessage(), cause);
    this.socket = socket;
  }

  /**
   * The socket that was tried.
   *
   * @return its path
   */
  public Path socketPath() {
    return socket;
  }
}
