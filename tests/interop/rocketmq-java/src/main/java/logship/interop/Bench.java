package logship.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.PutMessageStatus;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * The Java peer of {@code logship bench --peer java}: one Apache RocketMQ DefaultMessageStore as
 * a master or a slave, with RocketMQ's default store settings except those named here, and puts
 * made in this process. It speaks the bench's peer protocol: one command per stdin line, one
 * JSON object per stdout line.
 *
 * <p>Arguments: --role ASYNC_MASTER|SYNC_MASTER|SLAVE --store DIR --segment BYTES
 * --flush ASYNC_FLUSH|SYNC_FLUSH [--ha-port N] [--master HOST:PORT].
 *
 * <p>{@code bench} answers {@code puts} (those that ended PUT_OK, the only ones in the
 * percentiles), {@code failed} (the others) and {@code firstFailure}.
 *
 * <p>Commands: fill BYTES SIZE | bench PRODUCERS COUNT SIZE | status | wait-idle TIMEOUT_MS |
 * watch-connect TIMEOUT_MS | watch-slave END TIMEOUT_MS | wait-offset END TIMEOUT_MS | shutdown.
 */
public final class Bench {
    private static final String TOPIC = "BenchTopic";
    private static PrintStream out;
    private final DefaultMessageStore store;
    private final AtomicLong next = new AtomicLong();
    private final InetSocketAddress host = new InetSocketAddress("127.0.0.1", 10911);

    private Bench(DefaultMessageStore store) {
        this.store = store;
    }

    public static void main(String[] args) throws Exception {
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        MessageStoreConfig c = new MessageStoreConfig();
        String root = opts.get("store");
        BrokerRole role = BrokerRole.valueOf(opts.getOrDefault("role", "ASYNC_MASTER"));
        c.setBrokerRole(role);
        c.setStorePathRootDir(root);
        c.setStorePathCommitLog(root + "/commitlog");
        c.setMappedFileSizeCommitLog(Integer.parseInt(opts.get("segment")));
        c.setHaListenPort(Integer.parseInt(opts.getOrDefault("ha-port", "0")));
        c.setFlushDiskType(FlushDiskType.valueOf(opts.getOrDefault("flush", "ASYNC_FLUSH")));
        if (role == BrokerRole.SYNC_MASTER) {
            Compat.replicas(c, 2, 2);
        }
        DefaultMessageStore store = Compat.open(c, role == BrokerRole.SLAVE ? 1 : 0, false);
        if (!store.load()) {
            emit("{\"event\":\"started\",\"load\":false}");
            System.exit(2);
        }
        store.start();
        if (opts.containsKey("master")) {
            store.updateHaMasterAddress(opts.get("master"));
        }
        emit("{\"event\":\"started\",\"load\":true,\"haPort\":" + c.getHaListenPort()
            + ",\"maxPhyOffset\":" + store.getMaxPhyOffset() + "}");
        Bench b = new Bench(store);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("shutdown")) {
                break;
            }
            try {
                b.command(w);
            } catch (Exception e) {
                emit("{\"event\":\"error\",\"message\":\"" + String.valueOf(e).replace("\"", "'") + "\"}");
            }
        }
        store.shutdown();
        emit("{\"event\":\"shutdown\"}");
        System.exit(0);
    }

    private MessageExt message(int size, long i) {
        byte[] body = new byte[size];
        java.util.Arrays.fill(body, (byte) 'x');
        for (int k = 0; k < 8 && k < size; k++) {
            body[k] = (byte) (i >>> (56 - 8 * k));
        }
        MessageExt m = Compat.newMessage();
        m.setTopic(TOPIC);
        m.setQueueId((int) (i % 8));
        m.setBody(body);
        m.setBornTimestamp(System.currentTimeMillis());
        m.setBornHost(host);
        m.setStoreHost(host);
        MessageAccessor.setProperties(m, new HashMap<>());
        Compat.setPropertiesString(m, "");
        return m;
    }

    private void command(String[] w) throws Exception {
        switch (w[0]) {
            case "fill": {
                long bytes = Long.parseLong(w[1]);
                int size = Integer.parseInt(w[2]);
                while (store.getMaxPhyOffset() < bytes) {
                    PutMessageResult r = Compat.put(store, message(size, next.getAndIncrement()));
                    if (r.getPutMessageStatus() != PutMessageStatus.PUT_OK) {
                        throw new IllegalStateException("fill put " + r.getPutMessageStatus());
                    }
                }
                emit("{\"event\":\"filled\",\"maxPhyOffset\":" + store.getMaxPhyOffset() + "}");
                return;
            }
            case "bench": {
                int producers = Integer.parseInt(w[1]);
                long end = next.get() + Long.parseLong(w[2]);
                int size = Integer.parseInt(w[3]);
                List<long[]> all = Collections.synchronizedList(new ArrayList<>());
                AtomicLong failed = new AtomicLong();
                AtomicReference<String> firstFailure = new AtomicReference<>("");
                Thread[] threads = new Thread[producers];
                long start = System.nanoTime();
                for (int t = 0; t < producers; t++) {
                    threads[t] = new Thread(() -> {
                        long[] lat = new long[16];
                        int n = 0;
                        try {
                            for (long i = next.getAndIncrement(); i < end; i = next.getAndIncrement()) {
                                MessageExt m = message(size, i);
                                long t0 = System.nanoTime();
                                PutMessageResult r;
                                try {
                                    r = Compat.put(store, m);
                                } catch (Throwable e) {
                                    // A put that throws (an OutOfMemoryError for the direct
                                    // buffer each put thread allocates, say) is a failed put,
                                    // counted like one: a thread that died of it took its
                                    // figures with it, and the round came out short of puts
                                    // without saying why.
                                    failed.incrementAndGet();
                                    firstFailure.compareAndSet("", e.toString().replace("\\", "/").replace("\"", "'"));
                                    continue;
                                }
                                long d = System.nanoTime() - t0;
                                if (r.getPutMessageStatus() != PutMessageStatus.PUT_OK) {
                                    // Counted, and kept out of the latencies (a timed-out put
                                    // waited syncFlushTimeout).
                                    failed.incrementAndGet();
                                    firstFailure.compareAndSet("", r.getPutMessageStatus().name());
                                    continue;
                                }
                                if (n == lat.length) {
                                    lat = java.util.Arrays.copyOf(lat, n * 2);
                                }
                                lat[n++] = d;
                            }
                        } finally {
                            all.add(java.util.Arrays.copyOf(lat, n));
                        }
                    });
                    threads[t].start();
                }
                for (Thread t : threads) {
                    t.join();
                }
                double secs = (System.nanoTime() - start) / 1e9;
                int total = 0;
                for (long[] l : all) {
                    total += l.length;
                }
                long[] lat = new long[total];
                int at = 0;
                for (long[] l : all) {
                    System.arraycopy(l, 0, lat, at, l.length);
                    at += l.length;
                }
                java.util.Arrays.sort(lat);
                emit("{\"event\":\"bench\",\"secs\":" + secs + ",\"puts\":" + total + ",\"failed\":" + failed.get()
                    + ",\"firstFailure\":\"" + firstFailure.get() + "\",\"p50us\":" + pct(lat, 0.5)
                    + ",\"p99us\":" + pct(lat, 0.99) + "}");
                return;
            }
            case "status":
                emit("{\"event\":\"status\",\"maxPhyOffset\":" + store.getMaxPhyOffset() + ",\"connections\":"
                    + store.getHaService().getConnectionCount().get() + ",\"slaveAck\":"
                    + store.getHaService().getPush2SlaveMaxOffset().get() + "}");
                return;
            case "wait-idle": {
                // Until no slave is connected (a stopped slave's connection is gone).
                long deadline = System.nanoTime() + Long.parseLong(w[1]) * 1_000_000L;
                while (store.getHaService().getConnectionCount().get() > 0 && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                emit("{\"event\":\"idle\",\"connections\":" + store.getHaService().getConnectionCount().get() + "}");
                return;
            }
            case "watch-connect": {
                // Answers as soon as a slave connects: the count rises above the lowest seen.
                long deadline = System.nanoTime() + Long.parseLong(w[1]) * 1_000_000L;
                long low = store.getHaService().getConnectionCount().get();
                long now = low;
                while (now <= low && System.nanoTime() < deadline) {
                    Thread.sleep(0, 100_000);
                    now = store.getHaService().getConnectionCount().get();
                    low = Math.min(low, now);
                }
                emit("{\"event\":\"connected\",\"connections\":" + store.getHaService().getConnectionCount().get() + "}");
                return;
            }
            case "watch-slave": {
                // From the first slave connection to its ack of END, as the master sees them.
                long end = Long.parseLong(w[1]);
                long deadline = System.nanoTime() + Long.parseLong(w[2]) * 1_000_000L;
                long connected = 0;
                boolean reached = false;
                while (System.nanoTime() < deadline) {
                    if (connected == 0 && store.getHaService().getConnectionCount().get() > 0) {
                        connected = System.nanoTime();
                    }
                    if (connected != 0 && store.getHaService().getPush2SlaveMaxOffset().get() >= end) {
                        reached = true;
                        break;
                    }
                    Thread.sleep(0, 200_000);
                }
                double secs = connected == 0 ? 0 : (System.nanoTime() - connected) / 1e9;
                emit("{\"event\":\"caught-up\",\"reached\":" + reached + ",\"secs\":" + secs + ",\"slaveAck\":"
                    + store.getHaService().getPush2SlaveMaxOffset().get() + "}");
                return;
            }
            case "wait-offset": {
                long end = Long.parseLong(w[1]);
                long start = System.nanoTime();
                long deadline = start + Long.parseLong(w[2]) * 1_000_000L;
                while (store.getMaxPhyOffset() < end && System.nanoTime() < deadline) {
                    Thread.sleep(0, 200_000);
                }
                emit("{\"event\":\"reached\",\"reached\":" + (store.getMaxPhyOffset() >= end) + ",\"secs\":"
                    + (System.nanoTime() - start) / 1e9 + ",\"maxPhyOffset\":" + store.getMaxPhyOffset() + "}");
                return;
            }
            default:
                emit("{\"event\":\"error\",\"message\":\"unknown command " + w[0] + "\"}");
        }
    }

    private static double pct(long[] sorted, double p) {
        if (sorted.length == 0) {
            return 0;
        }
        return sorted[(int) Math.round((sorted.length - 1) * p)] / 1e3;
    }

    private static synchronized void emit(String line) {
        out.println(line);
    }
}
