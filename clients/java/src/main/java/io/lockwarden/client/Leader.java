package io.lockwarden.client;

/**
 * Who leads an election, as {@code leader} and {@code observe} report it
 * (docs/elections.md#leader).
 *
 * @param value what the leader's campaign announced, e.g. {@code host-a:8080}
 * @param agent the id of the agent it campaigned through
 * @param host that agent's host name
 * @param pid the campaigning process's pid
 * @param since when it was elected, Unix milliseconds on the electing agent's clock
 * @param term its term: terms strictly increase from one leader to the next
 */
public record Leader(String value, String agent, String host, long pid, long since, long term) {}
