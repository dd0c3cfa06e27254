package io.lockwarden.client;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A strict JSON (RFC 8259) reader and writer for the agent's lines.
 *
 * <p>Reading: the input must be valid UTF-8 holding exactly one JSON value with optional JSON
 * whitespace around it. Objects become unmodifiable {@code Map<String, Object>} in key order
 * (a key given twice is refused), arrays unmodifiable {@code List<Object>}, strings {@code
 * String}, {@code true}/{@code false} {@code Boolean}, {@code null} a Java {@code null}
 * ({@code containsKey} tells it from an absent key), an integer without fraction or exponent a
 * {@code Long} (a {@code BigInteger} past 64 bits), any other number a finite {@code Double}.
 * Everything else is refused with a {@link ParseException}: comments, trailing commas, single
 * quotes, leading zeros, {@code NaN}, a bare {@code .5} or {@code 1.}, raw control characters
 * in strings, unknown escapes, unpaired surrogate escapes, nesting deeper than {@link
 * #MAX_DEPTH}, and anything after the value.
 *
 * <p>Writing: {@code null}, {@code Boolean}, {@code String}, {@code Integer}/{@code Long}/
 * {@code Short}/{@code Byte}/{@code BigInteger}/{@code BigDecimal}, finite {@code Double}/
 * {@code Float}, {@code Map} with {@code String} keys and any {@code Iterable}. Anything else,
 * a non-finite number or a string with an unpaired surrogate (not encodable as UTF-8) throws
 * {@link IllegalArgumentException}. The output is one line: control characters are escaped.
 */
final class Json {
  /** Deepest nesting of arrays and objects that {@link #parse} accepts. */
  static final int MAX_DEPTH = 64;

  /** Why a text is not (acceptable) JSON, and at which character offset. */
  static final class ParseException extends Exception {
    private static final long serialVersionUID = 1L;

    ParseException(String message, int offset) {
      super(message + " at offset " + offset);
    }
  }

  private Json() {}

  /** Parses UTF-8 bytes ({@code length} of them from {@code offset}) as one JSON value. */
  static Object parse(byte[] utf8, int offset, int length) throws ParseException {
    CharBuffer chars;
    try {
      chars = StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(utf8, offset, length));
    } catch (CharacterCodingException e) {
      throw new ParseException("invalid UTF-8", 0);
    }
    return parse(chars.toString());
  }

  /** Parses a text as one JSON value. */
  static Object parse(String text) throws ParseException {
    Reader r = new Reader(text);
    r.skipWhitespace();
    Object value = r.value(0);
    r.skipWhitespace();
    if (r.pos != text.length()) throw r.error("unexpected text after the value");
    return value;
  }

  /** Writes a value as JSON text (see the class comment for the types accepted). */
  static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out, 0);
    return out.toString();
  }

  private static final class Reader {
    final String s;
    int pos;

    Reader(String s) {
      this.s = s;
    }

    ParseException error(String message) {
      return new ParseException(message, pos);
    }

    void skipWhitespace() {
      while (pos < s.length()) {
        char c = s.charAt(pos);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
        pos++;
      }
    }

    Object value(int depth) throws ParseException {
      if (pos >= s.length()) throw error("unexpected end of input");
      char c = s.charAt(pos);
      switch (c) {
        case '{':
          return object(depth + 1);
        case '[':
          return array(depth + 1);
        case '"':
          return string();
        case 't':
          return literal("true", Boolean.TRUE);
        case 'f':
          return literal("false", Boolean.FALSE);
        case 'n':
          return literal("null", null);
        default:
          if (c == '-' || (c >= '0' && c <= '9')) return number();
          throw error("unexpected character '" + printable(c) + "'");
      }
    }

    Object literal(String word, Object value) throws ParseException {
      if (!s.startsWith(word, pos)) throw error("invalid literal");
      pos += word.length();
      return value;
    }

    Map<String, Object> object(int depth) throws ParseException {
      if (depth > MAX_DEPTH) throw error("nested deeper than " + MAX_DEPTH);
      pos++; // '{'
      Map<String, Object> map = new LinkedHashMap<>();
      skipWhitespace();
      if (pos < s.length() && s.charAt(pos) == '}') {
        pos++;
        return Collections.unmodifiableMap(map);
      }
      for (;;) {
        skipWhitespace();
        if (pos >= s.length() || s.charAt(pos) != '"') throw error("expected a string key");
        int keyAt = pos;
        String key = string();
        skipWhitespace();
        expect(':');
        skipWhitespace();
        Object value = value(depth);
        if (map.containsKey(key)) throw new ParseException("duplicate key \"" + key + "\"", keyAt);
        map.put(key, value);
        skipWhitespace();
        if (pos < s.length() && s.charAt(pos) == ',') {
          pos++;
          continue;
        }
        expect('}');
        return Collections.unmodifiableMap(map);
      }
    }

    List<Object> array(int depth) throws ParseException {
      if (depth > MAX_DEPTH) throw error("nested deeper than " + MAX_DEPTH);
      pos++; // '['
      List<Object> list = new ArrayList<>();
      skipWhitespace();
      if (pos < s.length() && s.charAt(pos) == ']') {
        pos++;
        return Collections.unmodifiableList(list);
      }
      for (;;) {
        skipWhitespace();
        list.add(value(depth));
        skipWhitespace();
        if (pos < s.length() && s.charAt(pos) == ',') {
          pos++;
          continue;
        }
        expect(']');
        return Collections.unmodifiableList(list);
      }
    }

    void expect(char c) throws ParseException {
      if (pos >= s.length() || s.charAt(pos) != c) throw error("expected '" + c + "'");
      pos++;
    }

    String string() throws ParseException {
      pos++; // opening quote
      StringBuilder out = new StringBuilder();
      for (;;) {
        if (pos >= s.length()) throw error("unterminated string");
        char c = s.charAt(pos);
        if (c == '"') {
          pos++;
          return out.toString();
        }
        if (c < 0x20) throw error("raw control character in a string");
        if (c != '\\') {
          out.append(c); // surrogates here are paired: the UTF-8 decoder made them
          pos++;
          continue;
        }
        pos++;
        if (pos >= s.length()) throw error("unterminated escape");
        char e = s.charAt(pos++);
        switch (e) {
          case '"': out.append('"'); break;
          case '\\': out.append('\\'); break;
          case '/': out.append('/'); break;
          case 'b': out.append('\b'); break;
          case 'f': out.append('\f'); break;
          case 'n': out.append('\n'); break;
          case 'r': out.append('\r'); break;
          case 't': out.append('\t'); break;
          case 'u': unicodeEscape(out); break;
          default:
            pos--;
            throw error("invalid escape '\\" + printable(e) + "'");
        }
      }
    }

    // After "\\u": one code unit, or a surrogate pair written as two escapes.
    void unicodeEscape(StringBuilder out) throws ParseException {
      char unit = hex4();
      if (Character.isLowSurrogate(unit)) throw error("unpaired low surrogate escape");
      if (Character.isHighSurrogate(unit)) {
        if (!s.startsWith("\\u", pos)) throw error("unpaired high surrogate escape");
        pos += 2;
        char low = hex4();
        if (!Character.isLowSurrogate(low)) throw error("unpaired high surrogate escape");
        out.append(unit).append(low);
        return;
      }
      out.append(unit);
    }

    char hex4() throws ParseException {
      if (pos + 4 > s.length()) throw error("truncated \\u escape");
      int v = 0;
      for (int i = 0; i < 4; i++) {
        char c = s.charAt(pos + i);
        int d;
        if (c >= '0' && c <= '9') {
          d = c - '0';
        } else if (c >= 'a' && c <= 'f') {
          d = c - 'a' + 10;
        } else if (c >= 'A' && c <= 'F') {
          d = c - 'A' + 10;
        } else {
          throw error("invalid \\u escape");
        }
        v = v * 16 + d;
      }
      pos += 4;
      return (char) v;
    }

    Object number() throws ParseException {
      int start = pos;
      if (s.charAt(pos) == '-') pos++;
      if (pos >= s.length()) throw error("truncated number");
      if (s.charAt(pos) == '0') {
        pos++;
        if (pos < s.length() && isDigit(s.charAt(pos))) throw error("leading zero in a number");
      } else if (isDigit(s.charAt(pos))) {
        digits();
      } else {
        throw error("expected a digit");
      }
      boolean integral = true;
      if (pos < s.length() && s.charAt(pos) == '.') {
        pos++;
        if (pos >= s.length() || !isDigit(s.charAt(pos))) throw error("expected a digit after '.'");
        digits();
        integral = false;
      }
      if (pos < s.length() && (s.charAt(pos) == 'e' || s.charAt(pos) == 'E')) {
        pos++;
        if (pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-')) pos++;
        if (pos >= s.length() || !isDigit(s.charAt(pos))) throw error("expected an exponent");
        digits();
        integral = false;
      }
      String text = s.substring(start, pos);
      if (integral) {
        BigInteger big = new BigInteger(text);
        return big.bitLength() < 64 ? (Object) big.longValue() : big;
      }
      double d = Double.parseDouble(text);
      if (Double.isInfinite(d)) throw new ParseException("number out of range", start);
      return d;
    }

    void digits() {
      while (pos < s.length() && isDigit(s.charAt(pos))) pos++;
    }

    static boolean isDigit(char c) {
      return c >= '0' && c <= '9';
    }
  }

  private static String printable(char c) {
    return c < 0x20 || c == 0x7f ? String.format("\\u%04x", (int) c) : String.valueOf(c);
  }

  private static void write(Object value, StringBuilder out, int depth) {
    if (depth > MAX_DEPTH) throw new IllegalArgumentException("nested deeper than " + MAX_DEPTH);
    if (value == null) {
      out.append("null");
    } else if (value instanceof String) {
      writeString((String) value, out);
    } else if (value instanceof Boolean) {
      out.append(value);
    } else if (value instanceof Long || value instanceof Integer || value instanceof Short
        || value instanceof Byte || value instanceof BigInteger) {
      out.append(value);
    } else if (value instanceof BigDecimal) {
      out.append(((BigDecimal) value).toString());
    } else if (value instanceof Double || value instanceof Float) {
      double d = ((Number) value).doubleValue();
      if (!Double.isFinite(d)) throw new IllegalArgumentException("JSON has no " + d);
      out.append(value);
    } else if (value instanceof Map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
        if (!(e.getKey() instanceof String)) {
          throw new IllegalArgumentException("a JSON object key must be a String: " + e.getKey());
        }
        if (!first) out.append(',');
        first = false;
        writeString((String) e.getKey(), out);
        out.append(':');
        write(e.getValue(), out, depth + 1);
      }
      out.append('}');
    } else if (value instanceof Iterable) {
      out.append('[');
      boolean first = true;
      for (Object item : (Iterable<?>) value) {
        if (!first) out.append(',');
        first = false;
        write(item, out, depth + 1);
      }
      out.append(']');
    } else {
      throw new IllegalArgumentException("no JSON form for " + value.getClass().getName());
    }
  }

  private static void writeString(String s, StringBuilder out) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c) && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        out.append(c).append(s.charAt(++i));
      } else if (Character.isSurrogate(c)) {
        throw new IllegalArgumentException("unpaired surrogate in a string (not valid UTF-8)");
      } else if (c == '"') {
        out.append("\\\"");
      } else if (c == '\\') {
        out.append("\\\\");
      } else if (c == '\n') {
        out.append("\\n");
      } else if (c == '\r') {
        out.append("\\r");
      } else if (c == '\t') {
        out.append("\\t");
      } else if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == '\u2028' || c == '\u2029') {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    out.append('"');
  }
}
