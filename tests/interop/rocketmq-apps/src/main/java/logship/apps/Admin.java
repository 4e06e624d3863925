package logship.apps;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;

import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * mqadmin (rocketmq-tools' MQAdminStartup) in this process.
 *
 * <pre>Admin [--access-key AK --secret-key SK] -- SUBCOMMAND [mqadmin options...]</pre>
 *
 * For example {@code Admin -- clusterList -n 127.0.0.1:9876}. Prints each line mqadmin writes to
 * stdout as {@code {"event":"out","text":...}} and each stderr line as {@code err}, as they come,
 * then {@code done}, with {@code ok} false when mqadmin reported an exception (it prints them
 * rather than failing) or exited. On 4.9.x mqadmin ignores the hook it is given and reads
 * conf/tools.yml under the RocketMQ home.
 */
public final class Admin {
    /** Logback's own status lines, printed when mqadmin first logs: not mqadmin's output. */
    private static final Pattern LOGBACK_STATUS = Pattern.compile("^\\d\\d:\\d\\d:\\d\\d,\\d{3} \\|-");

    private Admin() {}

    public static void main(String[] argv) {
        Apps.main("Admin", argv, Admin::run);
    }

    /** An output stream that prints each complete line as a JSON event, at once. */
    static final class Lines extends OutputStream {
        private final String event;
        private final PrintStream echo;
        private final ByteArrayOutputStream line = new ByteArrayOutputStream();
        volatile boolean sawException;

        Lines(String event, PrintStream echo) {
            this.event = event;
            this.echo = echo;
        }

        @Override
        public synchronized void write(int b) {
            if (b == '\n') {
                emit();
            } else {
                line.write(b);
            }
        }

        synchronized void emit() {
            String text = line.toString(StandardCharsets.UTF_8);
            line.reset();
            if (text.endsWith("\r")) {
                text = text.substring(0, text.length() - 1);
            }
            if (text.contains("Exception")) {
                sawException = true;
            }
            if (LOGBACK_STATUS.matcher(text).find()) {
                echo.println(text);
            } else if (!text.isEmpty()) {
                // Also on the real stderr, for a person reading a failed test's log.
                if (event.equals("err")) {
                    echo.println(text);
                }
                Out.event(event, "text", text);
            }
        }

        /** Prints what is left of an unfinished line (flush() does not: PrintStream flushes mid-line). */
        synchronized void drain() {
            if (line.size() > 0) {
                emit();
            }
        }
    }

    static void run(Args args) throws Exception {
        RPCHook hook = Apps.acl(args);
        List<String> rest = args.rest();
        args.done();
        if (rest.isEmpty()) {
            throw new IllegalArgumentException("give the mqadmin sub-command after --");
        }
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        Lines out = new Lines("out", oldErr);
        Lines err = new Lines("err", oldErr);
        long start = System.nanoTime();
        AtomicBoolean done = new AtomicBoolean();
        // Should a sub-command exit the JVM, still say so.
        Thread onExit = new Thread(() -> {
            out.drain();
            err.drain();
            if (done.compareAndSet(false, true)) {
                Out.event("done", "program", "Admin", "version", Compat.VERSION, "command", rest.get(0),
                    "ok", false, "exited", true, "elapsedMs", (System.nanoTime() - start) / 1_000_000L);
            }
        });
        Runtime.getRuntime().addShutdownHook(onExit);
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            MQAdminStartup.main0(rest.toArray(new String[0]), hook);
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
        out.drain();
        err.drain();
        if (done.compareAndSet(false, true)) {
            Out.event("done", "program", "Admin", "version", Compat.VERSION, "command", rest.get(0),
                "ok", !(out.sawException || err.sawException), "elapsedMs", (System.nanoTime() - start) / 1_000_000L);
        }
    }
}
