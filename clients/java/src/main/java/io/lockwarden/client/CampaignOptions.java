package io.lockwarden.client;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The optional fields of a campaign (docs/elections.md#campaign). Immutable; build one with
 * {@link #builder()}. What is not set is left to the agent: ttl 30 s, and a wait of the agent's
 * {@code max_wait_ms} (5 minutes by default).
 */
public final class CampaignOptions {
  private static final CampaignOptions DEFAULTS = builder().build();

  private final Duration ttl;
  private final Duration waitFor;

  private CampaignOptions(Builder b) {
    ttl = b.ttl;
    waitFor = b.waitFor;
  }

  /**
   * The agent's defaults.
   *
   * @return options with nothing set
   */
  public static CampaignOptions defaults() {
    return DEFAULTS;
  }

  /**
   * A builder with nothing set.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /** The ttl asked for; null for the agent's default. */
  Duration ttl() {
    return ttl;
  }

  Map<String, Object> fields(String name, String value) {
    Map<String, Object> f = new LinkedHashMap<>();
    f.put("name", Objects.requireNonNull(name, "name"));
    f.put("value", Objects.requireNonNull(value, "value"));
    if (ttl != null) f.put("ttl_ms", ttl.toMillis());
    if (waitFor != null) f.put("wait_ms", waitFor.toMillis());
    return f;
  }

  /** Builds {@link CampaignOptions}. */
  public static final class Builder {
    private Duration ttl;
    private Duration waitFor;

    private Builder() {}

    /**
     * The leadership's time to live, renewed by the agent every ttl/3; a leader whose agent
     * dies is replaced about this long after.
     *
     * @param ttl the time to live
     * @return this builder
     */
    public Builder ttl(Duration ttl) {
      this.ttl = Objects.requireNonNull(ttl, "ttl");
      return this;
    }

    /**
     * How long to wait while another candidate leads; past it the campaign fails with {@link
     * ErrorCode#TIMEOUT}.
     *
     * @param wait the longest wait
     * @return this builder
     */
    public Builder waitFor(Duration wait) {
      this.waitFor = Objects.requireNonNull(wait, "wait");
      return this;
    }

    /**
     * The options.
     *
     * @return the options built
     */
    public CampaignOptions build() {
      return new CampaignOptions(this);
    }
  }
}
