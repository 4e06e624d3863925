package logship.apps;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * mqadmin (rocketmq-tools' MQAdminStartup) in this process.
 *
 * <pre>Admin [--access-key AK --secret-key SK] -- SUBCOMMAND [mqadmin options...]</pre>
 *
 * For example {@code Admin -- clusterList -n 127.0.0.1:9876}. Prints each line mqadmin wrote to
 * stdout as {@code {"event":"out","text":...}}, each stderr line as {@code err}, then {@code done}
 * with {@code ok} false when mqadmin reported an exception (it prints them rather than exiting).
 * On 4.9.x mqadmin ignores the hook it is given and reads conf/tools.yml under the RocketMQ home.
 */
public final class Admin {
    private static final java.util.regex.Pattern LOGBACK_STATUS =
        java.util.regex.Pattern.compile("^\\d\\d:\\d\\d:\\d\\d,\\d{3} \\|-");

    private Admin() {}

    public static void main(String[] argv) {
        Apps.main("Admin", argv, Admin::run);
    }

    static void run(Args args) throws Exception {
        RPCHook hook = Apps.acl(args);
        List<String> rest = args.rest();
        args.done();
        if (rest.isEmpty()) {
            throw new IllegalArgumentException("give the mqadmin sub-command after --");
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        long start = System.nanoTime();
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
        String o = out.toString(StandardCharsets.UTF_8);
        String e = err.toString(StandardCharsets.UTF_8);
        for (String line : o.split("\n", -1)) {
            // Logback's own status lines (its configuration, printed when mqadmin first logs).
            if (LOGBACK_STATUS.matcher(line).find()) {
                oldErr.println(line);
            } else if (!line.isEmpty()) {
                Out.event("out", "text", line);
            }
        }
        for (String line : e.split("\n", -1)) {
            if (!line.isEmpty()) {
                Out.event("err", "text", line);
            }
        }
        // Also on the real stderr, for a person reading a failed test's log.
        oldErr.print(e);
        boolean failed = e.contains("Exception") || o.contains("Exception");
        Out.event("done", "program", "Admin", "version", Compat.VERSION, "command", rest.get(0),
            "ok", !failed, "elapsedMs", (System.nanoTime() - start) / 1_000_000L);
    }
}
