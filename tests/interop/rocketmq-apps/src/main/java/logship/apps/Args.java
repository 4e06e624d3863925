package logship.apps;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Command-line arguments: {@code --name value} pairs, {@code --flag} alone (true), and repeatable
 * {@code --set key=value}. Unknown names are an error, so a typo never silently changes a test.
 */
public final class Args {
    private final Map<String, String> values = new HashMap<>();
    private final List<String> sets = new ArrayList<>();
    private final List<String> rest = new ArrayList<>();
    private final List<String> used = new ArrayList<>();

    public Args(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--")) {
                for (int j = i + 1; j < args.length; j++) {
                    rest.add(args[j]);
                }
                break;
            }
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + a + " (options are --name value)");
            }
            String name = a.substring(2);
            String value = "true";
            if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                value = args[++i];
            }
            if (name.equals("set")) {
                sets.add(value);
            } else {
                values.put(name, value);
            }
        }
    }

    public String get(String name, String dflt) {
        used.add(name);
        return values.getOrDefault(name, dflt);
    }

    public String need(String name) {
        used.add(name);
        String v = values.get(name);
        if (v == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return v;
    }

    public int integer(String name, int dflt) {
        return Integer.parseInt(get(name, Integer.toString(dflt)));
    }

    public long number(String name, long dflt) {
        return Long.parseLong(get(name, Long.toString(dflt)));
    }

    public boolean flag(String name) {
        return Boolean.parseBoolean(get(name, "false"));
    }

    public boolean has(String name) {
        used.add(name);
        return values.containsKey(name);
    }

    /** Every {@code --set key=value}, in order. */
    public List<String> sets() {
        used.add("set");
        return sets;
    }

    /** What followed {@code --}. */
    public List<String> rest() {
        return rest;
    }

    /** Fails on any option that no one asked for (call after reading them all). */
    public void done() {
        for (String k : values.keySet()) {
            if (!used.contains(k)) {
                throw new IllegalArgumentException("unknown option --" + k);
            }
        }
    }
}
