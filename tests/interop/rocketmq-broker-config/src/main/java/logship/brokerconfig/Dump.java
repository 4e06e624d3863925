package logship.brokerconfig;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/** The canonical text form both tools print and logship-broker's test prints too: sorted lines. */
final class Dump {
    private final List<String> lines = new ArrayList<>();

    void add(String line) {
        lines.add(line);
    }

    static String attrs(Map<String, String> attributes) {
        if (attributes == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder("{");
        for (Map.Entry<String, String> e : new TreeMap<>(attributes).entrySet()) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            sb.append(e.getKey()).append('=').append(e.getValue());
        }
        return sb.append('}').toString();
    }

    String text() {
        Collections.sort(lines);
        return String.join("\n", lines) + "\n";
    }
}
