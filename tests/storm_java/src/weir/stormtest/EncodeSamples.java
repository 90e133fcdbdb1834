package weir.stormtest;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.storm.spout.CheckPointState;
import org.apache.storm.state.DefaultStateEncoder;
import org.apache.storm.state.DefaultStateSerializer;

/**
 * Writes what Apache Storm's own {@code DefaultStateEncoder} (Kryo) makes of sample keys and values,
 * as JSON lines {@code {"name": ..., "key": HEX, "value": HEX}}, for weir's decoder tests.
 * Usage: {@code EncodeSamples OUT_FILE}.
 */
public final class EncodeSamples {
    private EncodeSamples() {
    }

    private static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }

    public static void main(String[] args) throws Exception {
        DefaultStateEncoder<Object, Object> enc =
            new DefaultStateEncoder<>(new DefaultStateSerializer<>(), new DefaultStateSerializer<>());
        List<Object[]> samples = new ArrayList<>();
        samples.add(new Object[] {"string", "hello"});
        samples.add(new Object[] {"string_1", "a"});
        samples.add(new Object[] {"string_empty", ""});
        samples.add(new Object[] {"string_long", "the-quick-brown-fox-jumps-over-the-lazy-dog-0123456789"});
        samples.add(new Object[] {"string_unicode", "grüße \u6f22\u5b57 \ud83d\ude00"});
        samples.add(new Object[] {"long", 1234567890123L});
        samples.add(new Object[] {"long_neg", -42L});
        samples.add(new Object[] {"long_max", Long.MAX_VALUE});
        samples.add(new Object[] {"long_min", Long.MIN_VALUE});
        samples.add(new Object[] {"int", 70000});
        samples.add(new Object[] {"int_neg", Integer.MIN_VALUE});
        samples.add(new Object[] {"double", 3.25});
        samples.add(new Object[] {"float", 1.5f});
        samples.add(new Object[] {"bool_true", Boolean.TRUE});
        samples.add(new Object[] {"bool_false", Boolean.FALSE});
        samples.add(new Object[] {"short", (short) -7});
        samples.add(new Object[] {"byte", (byte) 5});
        samples.add(new Object[] {"char", 'x'});
        samples.add(new Object[] {"bytes", new byte[] {0, 1, 2, (byte) 255}});
        samples.add(new Object[] {"list_longs", new ArrayList<>(Arrays.asList(1L, 2L, 3L))});
        samples.add(new Object[] {"list_nulls", new ArrayList<>(Arrays.asList(1L, null, 3L))});
        samples.add(new Object[] {"list_strings_null", new ArrayList<>(Arrays.asList("a", null, "bc"))});
        samples.add(new Object[] {"list_mixed", new ArrayList<>(Arrays.asList("a", 2L, 3.5, true))});
        samples.add(new Object[] {"list_empty", new ArrayList<>()});
        samples.add(new Object[] {"linked_list", new LinkedList<>(Arrays.asList("x", "y"))});
        samples.add(new Object[] {"list_nested", new ArrayList<>(Arrays.asList(
            new ArrayList<>(Arrays.asList(1L, 2L)), new ArrayList<>(Arrays.asList(3L))))});
        samples.add(new Object[] {"hash_set", new HashSet<>(Arrays.asList("p", "q", "r"))});
        samples.add(new Object[] {"tree_set", new TreeSet<>(Arrays.asList(5L, 1L, 3L))});
        HashMap<String, Long> map = new HashMap<>();
        map.put("one", 1L);
        map.put("two", 2L);
        samples.add(new Object[] {"hash_map", map});
        LinkedHashMap<String, Object> lmap = new LinkedHashMap<>();
        lmap.put("name", "weir");
        lmap.put("tags", new ArrayList<>(Arrays.asList("a", "b")));
        lmap.put("n", null);
        samples.add(new Object[] {"linked_hash_map", lmap});
        TreeMap<String, Integer> tmap = new TreeMap<>();
        tmap.put("b", 2);
        tmap.put("a", 1);
        samples.add(new Object[] {"tree_map", tmap});
        HashMap<Long, String> longKeys = new HashMap<>();
        longKeys.put(1L, "a");
        samples.add(new Object[] {"map_long_keys", longKeys});
        samples.add(new Object[] {"unsupported_date", new java.util.Date(0)});
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[0]), StandardCharsets.UTF_8))) {
            for (Object[] s : samples) {
                out.println("{\"name\": \"" + s[0] + "\", \"key\": \"" + hex(enc.encodeKey(s[1]))
                    + "\", \"value\": \"" + hex(enc.encodeValue(s[1])) + "\"}");
            }
            for (CheckPointState.State phase : CheckPointState.State.values()) {
                out.println("{\"name\": \"checkpoint_" + phase.name().toLowerCase(java.util.Locale.ROOT) + "\", \"key\": \""
                    + hex(enc.encodeKey("__state")) + "\", \"value\": \"" + hex(enc.encodeValue(new CheckPointState(7, phase)))
                    + "\"}");
            }
            out.println("{\"name\": \"tombstone\", \"key\": \"\", \"value\": \"" + hex(enc.getTombstoneValue()) + "\"}");
        }
    }
}
