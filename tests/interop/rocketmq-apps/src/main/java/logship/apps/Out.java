package logship.apps;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The program's only stdout: one JSON object per line. {@link #init} points {@code System.out} at
 * stderr first, so whatever RocketMQ or its logging prints never mixes with the JSON lines.
 */
public final class Out {
    private static PrintStream json;

    private Out() {}

    static synchronized void init() {
        if (json == null) {
            json = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
            System.setOut(System.err);
        }
    }

    /** Prints {@code {"event": event, k: v, ...}}. */
    public static void event(String event, Object... kv) {
        Map<String, Object> m = Json.obj("event", event);
        m.putAll(Json.obj(kv));
        line(m);
    }

    public static synchronized void line(Map<String, Object> m) {
        json.println(Json.write(m));
        json.flush();
    }

    /** An error line naming the exception's class, its RocketMQ response code when it has one. */
    public static Map<String, Object> error(Throwable e) {
        Map<String, Object> m = Json.obj("class", e.getClass().getName(), "message", String.valueOf(e.getMessage()));
        Integer code = Errors.responseCode(e);
        if (code != null) {
            m.put("responseCode", code);
        }
        Throwable cause = e.getCause();
        if (cause != null && cause != e) {
            m.put("cause", cause.getClass().getName());
        }
        return m;
    }
}
