package logship.apps;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * A DefaultMQProducer.
 *
 * <pre>
 * Produce --namesrv ADDR --topic T [--group G] [--instance I]
 *         [--mode sync|async|oneway|batch[,...]] [--count N] [--size BYTES] [--threads T]
 *         [--batch-size B] [--tags A,B,...] [--keys PREFIX] [--props k=v,k=v]
 *         [--duration-ms D | --until-stopped] [--interval-ms MS] [--max-in-flight M]
 *         [--latency-fault] [--retries N] [--retries-async N] [--retry-another-broker]
 *         [--timeout-ms MS] [--poll-namesrv-ms MS] [--quiet] [--born-nanos]
 *         [--access-key AK --secret-key SK]
 * </pre>
 *
 * Message {@code i} has the body {@code "{instance}-{i:08}-aaaa..."} of {@code size} bytes, tag
 * {@code tags[i % n]}, keys {@code "{keys}-{i}"}, and the user properties {@code seq=i},
 * {@code producer=instance}, with {@code --born-nanos} {@code bornNanos} (System.nanoTime() when
 * built, for a consumer's end-to-end latency), plus {@code --props}. Prints a {@code send} line per send (a batch:
 * one line per batch, with {@code n} and every id) or {@code send_error} (class, responseCode),
 * {@code oneway} per one-way send, and a final {@code summary} with counts and latency
 * percentiles in microseconds. {@code --count} sends N messages (per mode, with several modes
 * run one after another, message numbers going on); {@code --duration-ms} or
 * {@code --until-stopped} (stdin EOF or SIGTERM) sends until then, for failover runs.
 * {@code --poll-namesrv-ms} sets the client's {@code pollNameServerInterval} (its route refresh,
 * 30 s by default).
 */
public final class Produce {
    private Produce() {}

    public static void main(String[] argv) {
        Apps.main("Produce", argv, Produce::run);
    }

    static final class Plan {
        String topic;
        String instance;
        String mode;
        long count;
        int size;
        int batch;
        String[] tags;
        String keys;
        Map<String, String> props = new TreeMap<>();
        boolean quiet;
        boolean bornNanos;
        long intervalMs;

        /** This plan with another mode. */
        Plan with(String m) {
            Plan p = new Plan();
            p.topic = topic;
            p.instance = instance;
            p.mode = m;
            p.count = count;
            p.size = size;
            p.batch = batch;
            p.tags = tags;
            p.keys = keys;
            p.props = props;
            p.quiet = quiet;
            p.bornNanos = bornNanos;
            p.intervalMs = intervalMs;
            return p;
        }
    }

    static void run(Args args) throws Exception {
        Plan plan = new Plan();
        String namesrv = args.need("namesrv");
        plan.topic = args.need("topic");
        plan.instance = args.get("instance", "producer-" + ProcessHandle.current().pid());
        String group = args.get("group", "logship_apps_producer");
        String[] modes = args.get("mode", "sync").split(",");
        for (String mode : modes) {
            if (!Arrays.asList("sync", "async", "oneway", "batch").contains(mode)) {
                throw new IllegalArgumentException("--mode is sync, async, oneway or batch, or a list of them");
            }
        }
        plan.mode = modes[0];
        plan.count = args.number("count", 100);
        plan.size = args.integer("size", 128);
        int threads = args.integer("threads", 1);
        plan.batch = args.integer("batch-size", 10);
        plan.tags = args.get("tags", "TagA").split(",");
        plan.keys = args.get("keys", "key");
        String props = args.get("props", "");
        for (String kv : props.isEmpty() ? new String[0] : props.split(",")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--props wants k=v,k=v, got " + kv);
            }
            plan.props.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        long durationMs = args.number("duration-ms", 0);
        boolean untilStopped = args.flag("until-stopped");
        plan.intervalMs = args.number("interval-ms", 0);
        int maxInFlight = args.integer("max-in-flight", 64);
        plan.quiet = args.flag("quiet");
        plan.bornNanos = args.flag("born-nanos");

        DefaultMQProducer producer = new DefaultMQProducer(group, Apps.acl(args));
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(plan.instance);
        producer.setSendLatencyFaultEnable(args.flag("latency-fault"));
        producer.setRetryTimesWhenSendFailed(args.integer("retries", 2));
        producer.setRetryTimesWhenSendAsyncFailed(args.integer("retries-async", 2));
        producer.setRetryAnotherBrokerWhenNotStoreOK(args.flag("retry-another-broker"));
        producer.setSendMsgTimeout(args.integer("timeout-ms", 3000));
        producer.setVipChannelEnabled(false);
        producer.setPollNameServerInterval(args.integer("poll-namesrv-ms", producer.getPollNameServerInterval()));
        args.done();
        Apps.watchStop();
        producer.start();
        Out.event("ready", "program", "Produce", "version", Compat.VERSION, "instance", plan.instance,
            "mode", String.join(",", modes));

        boolean unbounded = durationMs > 0 || untilStopped;
        if (unbounded && modes.length > 1) {
            throw new IllegalArgumentException("--duration-ms and --until-stopped take one --mode");
        }
        long deadline = durationMs > 0 ? System.nanoTime() + durationMs * 1_000_000L : Long.MAX_VALUE;
        Stats stats = new Stats();
        Semaphore inFlight = new Semaphore(maxInFlight);
        long start = System.nanoTime();
        // One mode after another; message numbers go on: mode k sends count messages from k * count.
        for (int k = 0; k < modes.length && !Apps.stopped(); k++) {
            Plan p = plan.with(modes[k]);
            long base = k * plan.count;
            AtomicLong next = new AtomicLong(base);
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                Thread w = new Thread(() -> {
                    int step = p.mode.equals("batch") ? p.batch : 1;
                    while (!Apps.stopped() && System.nanoTime() < deadline) {
                        long first = next.getAndAdd(step);
                        if (!unbounded && first >= base + p.count) {
                            return;
                        }
                        long n = unbounded ? step : Math.min(step, base + p.count - first);
                        send(producer, p, first, n, stats, inFlight);
                        if (p.intervalMs > 0) {
                            try {
                                Thread.sleep(p.intervalMs);
                            } catch (InterruptedException e) {
                                return;
                            }
                        }
                    }
                }, "send-" + t);
                w.start();
                workers.add(w);
            }
            for (Thread w : workers) {
                w.join();
            }
            // Every async callback has run once all permits are back.
            if (!inFlight.tryAcquire(maxInFlight, 60, TimeUnit.SECONDS)) {
                Out.event("error", "message", "async sends still unanswered after 60 s");
            } else {
                inFlight.release(maxInFlight);
            }
        }
        long elapsedMs = (System.nanoTime() - start) / 1_000_000L;
        producer.shutdown();
        Out.line(stats.summary(elapsedMs));
    }

    static Message message(Plan plan, long i) {
        Message m = new Message(plan.topic, plan.tags[(int) (i % plan.tags.length)],
            plan.keys + "-" + i, Apps.body(plan.instance, i, plan.size));
        m.putUserProperty("seq", Long.toString(i));
        m.putUserProperty("producer", plan.instance);
        if (plan.bornNanos) {
            // CLOCK_MONOTONIC on Linux, shared by every process on the host: a consumer there
            // measures the end-to-end latency from it.
            m.putUserProperty("bornNanos", Long.toString(System.nanoTime()));
        }
        for (Map.Entry<String, String> e : plan.props.entrySet()) {
            m.putUserProperty(e.getKey(), e.getValue());
        }
        return m;
    }

    static void send(DefaultMQProducer producer, Plan plan, long first, long n, Stats stats, Semaphore inFlight) {
        long t0 = System.nanoTime();
        try {
            switch (plan.mode) {
                case "sync": {
                    SendResult r = producer.send(message(plan, first));
                    stats.ok(plan, first, 1, r, t0);
                    break;
                }
                case "batch": {
                    List<Message> batch = new ArrayList<>();
                    for (long i = first; i < first + n; i++) {
                        batch.add(message(plan, i));
                    }
                    SendResult r = producer.send(batch);
                    stats.ok(plan, first, (int) n, r, t0);
                    break;
                }
                case "oneway": {
                    producer.sendOneway(message(plan, first));
                    stats.oneway(plan, first, t0);
                    break;
                }
                case "async": {
                    inFlight.acquire();
                    producer.send(message(plan, first), new SendCallback() {
                        @Override
                        public void onSuccess(SendResult r) {
                            stats.ok(plan, first, 1, r, t0);
                            inFlight.release();
                        }

                        @Override
                        public void onException(Throwable e) {
                            stats.error(plan, first, e, t0);
                            inFlight.release();
                        }
                    });
                    break;
                }
                default:
                    throw new IllegalStateException(plan.mode);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            if (plan.mode.equals("async")) {
                // send() itself threw: the callback will not run.
                inFlight.release();
            }
            stats.error(plan, first, e, t0);
        }
    }

    /** Counts and latencies of every send, thread-safe. */
    static final class Stats {
        final AtomicLong messages = new AtomicLong();
        final AtomicLong sends = new AtomicLong();
        final AtomicLong errors = new AtomicLong();
        final Map<String, AtomicLong> statuses = new ConcurrentHashMap<>();
        final Map<String, AtomicLong> errorClasses = new ConcurrentHashMap<>();
        final Map<String, AtomicLong> brokers = new ConcurrentHashMap<>();
        final ConcurrentLinkedQueue<Long> latencies = new ConcurrentLinkedQueue<>();
        volatile long firstErrorNanos;
        volatile long lastErrorNanos;

        void ok(Plan plan, long i, int n, SendResult r, long t0) {
            long us = (System.nanoTime() - t0) / 1000;
            latencies.add(us);
            sends.incrementAndGet();
            messages.addAndGet(n);
            String status = r.getSendStatus().name();
            statuses.computeIfAbsent(status, k -> new AtomicLong()).addAndGet(n);
            String broker = r.getMessageQueue().getBrokerName();
            brokers.computeIfAbsent(broker, k -> new AtomicLong()).addAndGet(n);
            if (plan.quiet) {
                return;
            }
            Map<String, Object> m = Json.obj("event", "send", "mode", plan.mode, "i", i, "n", n, "status", status,
                "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId(),
                "topic", r.getMessageQueue().getTopic(), "broker", broker,
                "queue", r.getMessageQueue().getQueueId(), "queueOffset", r.getQueueOffset(),
                "latencyUs", us, "atMs", System.currentTimeMillis());
            if (n > 1) {
                m.put("msgIds", Arrays.asList(String.valueOf(r.getMsgId()).split(",")));
                m.put("offsetMsgIds", Arrays.asList(String.valueOf(r.getOffsetMsgId()).split(",")));
            }
            Out.line(m);
        }

        void oneway(Plan plan, long i, long t0) {
            long us = (System.nanoTime() - t0) / 1000;
            latencies.add(us);
            sends.incrementAndGet();
            messages.incrementAndGet();
            statuses.computeIfAbsent("ONEWAY", k -> new AtomicLong()).incrementAndGet();
            if (!plan.quiet) {
                Out.event("oneway", "i", i, "latencyUs", us);
            }
        }

        void error(Plan plan, long i, Throwable e, long t0) {
            long now = System.nanoTime();
            if (errors.getAndIncrement() == 0) {
                firstErrorNanos = now;
            }
            lastErrorNanos = now;
            errorClasses.computeIfAbsent(e.getClass().getSimpleName(), k -> new AtomicLong()).incrementAndGet();
            Map<String, Object> m = Out.error(e);
            m.put("i", i);
            m.put("latencyUs", (now - t0) / 1000);
            m.put("atMs", System.currentTimeMillis());
            Out.line(Apps.with("send_error", m));
        }

        Map<String, Object> summary(long elapsedMs) {
            long[] l = latencies.stream().mapToLong(Long::longValue).sorted().toArray();
            return Json.obj("event", "summary", "program", "Produce", "messages", messages.get(),
                "sends", sends.get(), "errors", errors.get(), "statuses", counts(statuses),
                "errorClasses", counts(errorClasses), "brokers", counts(brokers),
                "elapsedMs", elapsedMs,
                "p50Us", pct(l, 50), "p90Us", pct(l, 90), "p99Us", pct(l, 99),
                "maxUs", l.length == 0 ? null : l[l.length - 1]);
        }

        static Map<String, Object> counts(Map<String, AtomicLong> m) {
            Map<String, Object> out = new TreeMap<>();
            m.forEach((k, v) -> out.put(k, v.get()));
            return out;
        }

        static Long pct(long[] sorted, int p) {
            if (sorted.length == 0) {
                return null;
            }
            int idx = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
            return sorted[Math.max(0, Math.min(sorted.length - 1, idx))];
        }
    }
}
