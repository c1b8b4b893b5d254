package streamsdsl.oracle;

import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.kstream.Aggregator;
import org.apache.kafka.streams.kstream.Initializer;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.Merger;
import org.apache.kafka.streams.kstream.Predicate;
import org.apache.kafka.streams.kstream.Reducer;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.ValueJoinerWithKey;
import org.apache.kafka.streams.kstream.ValueMapper;
import org.apache.kafka.streams.kstream.ValueMapperWithKey;

/**
 * The menu of user functions, by name: the same functions as oracle/menu.py, one switch per
 * role. Keys are Strings (or null), values Strings or Longs; an unknown name is an error that
 * names the role.
 */
final class Menu {
    private Menu() {
    }

    static String text(Object value) {
        return String.valueOf(value);
    }

    private static String first(Object value) {
        return value == null ? null : ((String) value).substring(0, Math.min(1, ((String) value).length()));
    }

    private static IllegalArgumentException unknown(String role, String name) {
        return new IllegalArgumentException("not on the oracle's menu as a " + role + ": " + name);
    }

    static Predicate<Object, Object> predicate(String name) {
        switch (name) {
            case "value_not_null": return (k, v) -> v != null;
            case "key_not_null": return (k, v) -> k != null;
            case "key_is_a": return (k, v) -> "a".equals(k);
            case "value_short": return (k, v) -> v == null || ((String) v).length() <= 2;
            case "value_even": return (k, v) -> v != null && (Long) v % 2 == 0;
            default: throw unknown("predicate", name);
        }
    }

    static ValueMapper<Object, Object> valueMapper(String name) {
        switch (name) {
            case "upper": return v -> v == null ? null : ((String) v).toUpperCase();
            case "twice": return v -> v == null ? null : (String) v + v;
            case "null_if_x": return v -> "x".equals(v) ? null : v;
            case "length": return v -> v == null ? null : (Object) (long) ((String) v).length();
            case "inc": return v -> v == null ? null : (Object) ((Long) v + 1);
            case "to_text": return v -> v == null ? null : v.toString();
            default: throw unknown("value mapper", name);
        }
    }

    /** Whether the function takes the key (a ValueMapperWithKey / ValueJoinerWithKey). */
    static boolean withKey(String name) {
        return name.equals("key_colon") || name.equals("key_pair");
    }

    static ValueMapperWithKey<Object, Object, Object> valueMapperWithKey(String name) {
        switch (name) {
            case "key_colon": return (k, v) -> v == null ? null : text(k) + ":" + v;
            default: throw unknown("value mapper with key", name);
        }
    }

    static ValueJoinerWithKey<Object, Object, Object, Object> joinerWithKey(String name) {
        switch (name) {
            case "key_pair": return (k, v1, v2) -> text(k) + ":" + text(v1) + "+" + text(v2);
            default: throw unknown("joiner with key", name);
        }
    }

    static KeyValueMapper<Object, Object, KeyValue<Object, Object>> mapper(String name) {
        switch (name) {
            case "swap": return (k, v) -> KeyValue.pair(v, k);
            case "key_or_z": return (k, v) -> KeyValue.pair(k == null ? "z" : k, v);
            case "value_initial_key": return (k, v) -> KeyValue.pair(first(v), v);
            default: throw unknown("mapper", name);
        }
    }

    static KeyValueMapper<Object, Object, Iterable<KeyValue<Object, Object>>> flatMapper(String name) {
        switch (name) {
            case "chars": return (k, v) -> {
                List<KeyValue<Object, Object>> out = new ArrayList<>();
                for (char c : (v == null ? "" : (String) v).toCharArray()) {
                    out.add(KeyValue.pair(k, String.valueOf(c)));
                }
                return out;
            };
            case "with_swapped": return (k, v) -> List.of(KeyValue.pair(k, v), KeyValue.pair(v, k));
            default: throw unknown("flat mapper", name);
        }
    }

    static ValueMapper<Object, Iterable<Object>> flatValueMapper(String name) {
        switch (name) {
            case "value_chars": return v -> {
                List<Object> out = new ArrayList<>();
                for (char c : (v == null ? "" : (String) v).toCharArray()) {
                    out.add(String.valueOf(c));
                }
                return out;
            };
            default: throw unknown("flat value mapper", name);
        }
    }

    static KeyValueMapper<Object, Object, Object> keySelector(String name) {
        switch (name) {
            case "value_as_key": return (k, v) -> v;
            case "key_upper": return (k, v) -> k == null ? null : ((String) k).toUpperCase();
            case "constant_key": return (k, v) -> "all";
            case "value_initial": return (k, v) -> first(v);
            default: throw unknown("key selector", name);
        }
    }

    static Initializer<Object> initializer(String name) {
        switch (name) {
            case "empty": return () -> "";
            case "zero": return () -> 0L;
            default: throw unknown("initializer", name);
        }
    }

    static Aggregator<Object, Object, Object> aggregator(String name) {
        switch (name) {
            case "append": return (k, v, agg) -> (String) agg + (v == null ? "-" : (String) v);
            case "add_length": return (k, v, agg) -> (Long) agg + (v == null ? 0L : ((String) v).length());
            case "add": return (k, v, agg) -> (Long) agg + (v == null ? 0L : (Long) v);
            case "add_length_adder": return (k, v, agg) -> (Long) agg + ((String) v).length();
            case "sub_length_subtractor": return (k, v, agg) -> (Long) agg - ((String) v).length();
            default: throw unknown("aggregator", name);
        }
    }

    static Merger<Object, Object> merger(String name) {
        switch (name) {
            case "concat_bar": return (k, a1, a2) -> (String) a1 + "|" + a2;
            case "plus": return (k, a1, a2) -> (Long) a1 + (Long) a2;
            default: throw unknown("merger", name);
        }
    }

    static Reducer<Object> reducer(String name) {
        switch (name) {
            case "concat": case "concat_adder": return (agg, v) -> (String) agg + v;
            case "larger": return (agg, v) -> Math.max((Long) agg, (Long) v);
            case "strip_subtractor": return (agg, v) -> {
                String a = (String) agg;
                int at = a.indexOf((String) v);
                return at < 0 ? a : a.substring(0, at) + a.substring(at + ((String) v).length());
            };
            default: throw unknown("reducer", name);
        }
    }

    static java.util.function.Function<Object, Object> fkExtractor(String name) {
        switch (name) {
            case "length_key": {
                return v -> {
                    int n = ((String) v).length();
                    return n == 1 ? "a" : n == 2 ? "b" : n == 3 ? "c" : null;
                };
            }
            case "letter_key_or_null":
                return v -> ((String) v).contains("x") ? "a" : ((String) v).contains("y") ? "b" : null;
            default: throw unknown("fk_extractor", name);
        }
    }

    static ValueJoiner<Object, Object, Object> joiner(String name) {
        switch (name) {
            case "pair": return (v1, v2) -> text(v1) + "+" + text(v2);
            case "joiners_left": return (v1, v2) -> v1;
            case "joiners_right": return (v1, v2) -> v2;
            default: throw unknown("joiner", name);
        }
    }

    static KeyValueMapper<Object, Object, KeyValue<Object, Object>> tableSelector(String name) {
        switch (name) {
            case "by_value": return (k, v) -> KeyValue.pair(v, k);
            case "by_initial": return (k, v) -> KeyValue.pair(first(v), v);
            default: throw unknown("table selector", name);
        }
    }
}
