package logship.apps;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.RPCHook;

/** What every program shares: start-up, a RocketMQ home, the stop signal, bodies, ACL. */
public final class Apps {
    private static final CountDownLatch STOP = new CountDownLatch(1);
    private static final CountDownLatch DONE = new CountDownLatch(1);
    /** Set once the JVM is shutting down (SIGTERM): System.exit would then block for ever. */
    private static volatile boolean terminating;

    private Apps() {}

    /** A program's body; an exception ends the program with a {@code fatal} line and exit code 2. */
    public interface Body {
        void run(Args args) throws Exception;
    }

    public static void main(String program, String[] argv, Body body) {
        Out.init();
        try {
            Args args = new Args(argv);
            home(args.get("home", null));
            body.run(args);
            DONE.countDown();
            if (!terminating) {
                System.exit(0);
            }
        } catch (Throwable e) {
            e.printStackTrace();
            java.util.Map<String, Object> m = Out.error(e);
            m.put("program", program);
            Out.line(with("fatal", m));
            DONE.countDown();
            if (!terminating) {
                System.exit(2);
            }
        }
    }

    static java.util.Map<String, Object> with(String event, java.util.Map<String, Object> m) {
        java.util.Map<String, Object> out = Json.obj("event", event);
        out.putAll(m);
        return out;
    }

    /**
     * A RocketMQ home: {@code rocketmq.home.dir} (4.9.x reads its logback files from
     * {@code conf/} there, and refuses to start without them). Logs go to stderr at WARN.
     */
    static void home(String dir) throws IOException {
        File home = new File(dir != null ? dir
            : System.getProperty("java.io.tmpdir") + File.separator + "logship-apps-home");
        File conf = new File(home, "conf");
        conf.mkdirs();
        String logback = "<configuration>\n"
            + "  <appender name=\"err\" class=\"ch.qos.logback.core.ConsoleAppender\">\n"
            + "    <target>System.err</target>\n"
            + "    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{0} - %msg%n</pattern></encoder>\n"
            + "  </appender>\n"
            + "  <root level=\"WARN\"><appender-ref ref=\"err\"/></root>\n"
            + "</configuration>\n";
        for (String name : new String[] {"logback_broker.xml", "logback_namesrv.xml", "logback_tools.xml"}) {
            File f = new File(conf, name);
            if (!f.isFile()) {
                File tmp = File.createTempFile(name, ".tmp", conf);
                Files.write(tmp.toPath(), logback.getBytes(StandardCharsets.UTF_8));
                if (!tmp.renameTo(f)) {
                    tmp.delete();
                }
            }
        }
        System.setProperty(MixAll.ROCKETMQ_HOME_PROPERTY, home.getAbsolutePath());
    }

    /**
     * Starts watching for the end of the run: stdin reaching EOF (the parent closed it or died),
     * or SIGTERM. {@link #awaitStop} returns when either happened.
     */
    public static void watchStop() {
        watchStop(null);
    }

    /** {@link #watchStop()}, handing each stdin line to {@code onLine} (may be null). */
    public static void watchStop(java.util.function.Consumer<String> onLine) {
        Thread t = new Thread(() -> {
            try (java.io.BufferedReader in = new java.io.BufferedReader(
                new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    if (onLine != null) {
                        onLine.accept(line);
                    }
                }
            } catch (IOException ignored) {
                // A closed stdin is a stop too.
            }
            STOP.countDown();
        }, "stdin-eof");
        t.setDaemon(true);
        t.start();
        // On SIGTERM, let the program's own clean stop finish before the JVM goes.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            terminating = true;
            STOP.countDown();
            try {
                DONE.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
    }

    /** Waits until stopped, or at most {@code millis} (0: no limit); true when stopped. */
    public static boolean awaitStop(long millis) throws InterruptedException {
        if (millis <= 0) {
            STOP.await();
            return true;
        }
        return STOP.await(millis, TimeUnit.MILLISECONDS);
    }

    public static boolean stopped() {
        return STOP.getCount() == 0;
    }

    /** {@code obj.a().b()...} by reflection (for calls whose owner differs between lines), or null. */
    public static Object call(Object obj, String... methods) {
        Object o = obj;
        try {
            for (String m : methods) {
                if (o == null) {
                    return null;
                }
                java.lang.reflect.Method method = null;
                for (Class<?> c = o.getClass(); c != null && method == null; c = c.getSuperclass()) {
                    try {
                        method = c.getDeclaredMethod(m);
                    } catch (NoSuchMethodException ignored) {
                        // Try the superclass.
                    }
                }
                if (method == null) {
                    return null;
                }
                method.setAccessible(true);
                o = method.invoke(o);
            }
            return o;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /** A body like the store harness's: {@code "{who}-{i:08}-"} padded with one letter to {@code size}. */
    public static byte[] body(String who, long i, int size) {
        byte[] head = String.format("%s-%08d-", who, i).getBytes(StandardCharsets.UTF_8);
        byte[] b = new byte[Math.max(size, head.length)];
        System.arraycopy(head, 0, b, 0, head.length);
        for (int k = head.length; k < b.length; k++) {
            b[k] = (byte) ('a' + (i % 26));
        }
        return b;
    }

    /** CRC-32 (IEEE) of a body, as 8 hex digits: what every program prints as {@code bodyCrc}. */
    public static String crc(byte[] body) {
        CRC32 c = new CRC32();
        c.update(body);
        return String.format("%08x", c.getValue());
    }

    /** The ACL 1.0 client hook for {@code --access-key} and {@code --secret-key}, or null. */
    public static RPCHook acl(Args args) {
        String ak = args.get("access-key", null);
        String sk = args.get("secret-key", null);
        if (ak == null && sk == null) {
            return null;
        }
        if (ak == null || sk == null) {
            throw new IllegalArgumentException("--access-key and --secret-key go together");
        }
        return new AclClientRPCHook(new SessionCredentials(ak, sk));
    }
}
