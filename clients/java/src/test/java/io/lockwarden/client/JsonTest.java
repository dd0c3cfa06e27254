package io.lockwarden.client;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** The client's own JSON reader and writer; needs no agent. */
class JsonTest {
  private static Object parse(String text) throws Json.ParseException {
    byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
    return Json.parse(utf8, 0, utf8.length);
  }

  private static Executable refused(String text) {
    return () -> assertThrows(Json.ParseException.class, () -> parse(text),
        () -> "accepted " + text);
  }

  private static Executable refusedBytes(int... bytes) {
    byte[] b = new byte[bytes.length];
    for (int i = 0; i < bytes.length; i++) b[i] = (byte) bytes[i];
    return () -> assertThrows(Json.ParseException.class, () -> Json.parse(b, 0, b.length),
        () -> "accepted bytes " + Arrays.toString(bytes));
  }

  @Test
  void readsEveryKindOfValue() throws Exception {
    Object v = parse(" {\"s\":\"x\",\"i\":-12,\"d\":0.5,\"t\":true,\"f\":false,\"n\":null,"
        + "\"a\":[1,[],{}],\"o\":{\"k\":\"v\"}} ");
    Map<String, Object> expected = new LinkedHashMap<>();
    expected.put("s", "x");
    expected.put("i", -12L);
    expected.put("d", 0.5);
    expected.put("t", true);
    expected.put("f", false);
    expected.put("n", null);
    expected.put("a", List.of(1L, List.of(), Map.of()));
    expected.put("o", Map.of("k", "v"));
    assertEquals(expected, v);
    assertEquals(new ArrayList<>(expected.keySet()), new ArrayList<>(((Map<?, ?>) v).keySet()));
    assertTrue(((Map<?, ?>) v).containsKey("n"));
    assertThrows(UnsupportedOperationException.class, () -> ((Map<?, ?>) v).clear());
    assertEquals("", parse("\"\""));
    assertEquals(List.of(), parse("[ ]"));
    assertNull(parse("null"));
  }

  @Test
  void readsTheAgentsLines() throws Exception {
    Map<?, ?> grant = (Map<?, ?>) parse("{\"id\":2,\"ok\":true,\"resource\":\"db/migrations\","
        + "\"token\":\"5f1c0d9e2b7a44c1a08e3f6d9b2c7e1a4d8f0b3c\",\"validity_ms\":9897,"
        + "\"waited_ms\":0,\"fence\":9223372036854775807}\r"); // a CR before the newline is JSON space
    assertEquals(2L, grant.get("id"));
    assertEquals(Long.MAX_VALUE, grant.get("fence"));
    Map<?, ?> health = (Map<?, ?>) parse("{\"id\":11,\"ok\":true,\"quorum\":2,\"nodes\":[{\"addr\":"
        + "\"10.0.0.1:6379\",\"up\":true,\"rtt_ms\":0.412,\"quarantined\":false}]}");
    assertEquals(0.412, ((Map<?, ?>) ((List<?>) health.get("nodes")).get(0)).get("rtt_ms"));
    Map<?, ?> event = (Map<?, ?>) parse("{\"event\":\"leader\",\"name\":\"jobs\",\"leader\":null,"
        + "\"term\":7,\"missed\":false}");
    assertTrue(event.containsKey("leader") && event.get("leader") == null);
    assertEquals("naïve ☃ 𝄞 \"q\" \\ / \b\f\n\r\t é", parse(
        "\"naïve ☃ 𝄞 \\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00E9\""));
    assertEquals("𝄞", parse("\"\\ud834\\uDD1E\"")); // a pair of escapes is one code point
  }

  @Test
  void refusesMalformedInput() {
    assertAll(Stream.of("", " ", "{", "}", "[", "[1,]", "{\"a\":1,}", "{,}", "[,1]", "{\"a\"}",
        "{\"a\":}", "{\"a\" 1}", "{a:1}", "{'a':1}", "['a']", "{\"a\":1}}", "{\"a\":1} x",
        "{} {}", "[1 2]", "tru", "nul", "True", "NULL", "undefined", "NaN", "Infinity",
        "-Infinity", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\U0041\"",
        "\"tab\there\"", "\"nl\nhere\"", "\"\u0000\"", "/* c */ 1", "1 // c", "\u00a01",
        "\ufeff{}", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800x\"",
        "\"\\u０１２３\"").map(JsonTest::refused));
  }

  @Test
  void refusesNumbersOutsideTheGrammar() throws Exception {
    assertAll(Stream.of("01", "-01", "00", "+1", ".5", "1.", "-", "-.5", "1e", "1e+", "1.e3",
        "0x10", "1_000", "--1", "1e999", "-1e999").map(JsonTest::refused));
    assertEquals(0L, parse("-0"));
    assertEquals(Long.MIN_VALUE, parse("-9223372036854775808"));
    assertEquals(new BigInteger("9223372036854775808"), parse("9223372036854775808"));
    assertEquals(1000.0, parse("1e3")); // an exponent makes it a Double
    assertEquals(30000.0, parse("30000.0"));
    assertEquals(-2.5e-3, parse("-2.5E-3"));
  }

  @Test
  void refusesDuplicateKeys() throws Exception {
    assertAll(refused("{\"a\":1,\"a\":1}"), refused("{\"a\":1,\"b\":{\"c\":1,\"c\":2}}"),
        refused("{\"\\u0061\":1,\"a\":2}")); // the same key escaped is the same key
    assertEquals(Map.of("a", Map.of("a", 1L)), parse("{\"a\":{\"a\":1}}"));
  }

  @Test
  void refusesInvalidUtf8() throws Exception {
    assertAll(refusedBytes('"', 0xff, '"'), // never in UTF-8
        refusedBytes('"', 0xc3, '"'), // truncated sequence
        refusedBytes('"', 0xc0, 0xaf, '"'), // overlong '/'
        refusedBytes('"', 0xed, 0xa0, 0x80, '"'), // a surrogate encoded
        refusedBytes('"', 0xf4, 0x90, 0x80, 0x80, '"'), // past U+10FFFF
        refusedBytes('"', 0x80, '"')); // a lone continuation byte
    assertEquals("é", Json.parse(new byte[] {'"', (byte) 0xc3, (byte) 0xa9, '"'}, 0, 4));
  }

  @Test
  void limitsNesting() throws Exception {
    String ok = "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH);
    assertTrue(parse(ok) instanceof List);
    assertAll(refused("[".repeat(Json.MAX_DEPTH + 1) + "]".repeat(Json.MAX_DEPTH + 1)),
        refused("{\"a\":".repeat(Json.MAX_DEPTH + 1) + "1" + "}".repeat(Json.MAX_DEPTH + 1)));
  }

  @Test
  void writesOneLineThatReadsBack() throws Exception {
    Map<String, Object> value = new LinkedHashMap<>();
    value.put("id", 7L);
    value.put("op", "acquire");
    value.put("resource", "a\"b\\c\nd\re\tf\u0001g\u007fh\u2028é☃𝄞");
    value.put("ttl_ms", 30000);
    value.put("renew", true);
    value.put("none", null);
    value.put("list", List.of(1, "x", List.of()));
    value.put("big", new BigInteger("123456789012345678901234567890"));
    value.put("half", 0.5);
    String text = Json.write(value);
    assertEquals("{\"id\":7,\"op\":\"acquire\",\"resource\":\"a\\\"b\\\\c\\nd\\re\\tf\\u0001g"
        + "\\u007fh\\u2028é☃𝄞\",\"ttl_ms\":30000,\"renew\":true,\"none\":null,"
        + "\"list\":[1,\"x\",[]],\"big\":123456789012345678901234567890,\"half\":0.5}", text);
    assertFalse(text.contains("\n"));
    Map<String, Object> back = new LinkedHashMap<>(value);
    back.put("ttl_ms", 30000L); // integers read back as Long
    back.put("list", List.of(1L, "x", List.of()));
    assertEquals(back, parse(text));
  }

  @Test
  void writerRefusesWhatJsonCannotSay() {
    assertAll(
        () -> assertThrows(IllegalArgumentException.class, () -> Json.write(Double.NaN)),
        () -> assertThrows(IllegalArgumentException.class,
            () -> Json.write(Double.POSITIVE_INFINITY)),
        () -> assertThrows(IllegalArgumentException.class, () -> Json.write("\ud800")),
        () -> assertThrows(IllegalArgumentException.class, () -> Json.write("x\udc00y")),
        () -> assertThrows(IllegalArgumentException.class, () -> Json.write(Map.of(1, 2))),
        () -> assertThrows(IllegalArgumentException.class, () -> Json.write(new Object())),
        () -> assertThrows(IllegalArgumentException.class, () -> Json.write('c')));
  }
}
