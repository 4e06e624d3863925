package logship.apps;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * A DefaultMQPushConsumer.
 *
 * <pre>
 * PushConsume --namesrv ADDR --topic T --group G [--instance I] [--sub EXPR] [--orderly]
 *             [--from last|first|timestamp] [--timestamp yyyyMMddHHmmss] [--broadcast]
 *             [--count N] [--duration-ms D] [--linger-ms MS] [--summary-ms MS]
 *             [--later-keys k1,k2] [--later-all] [--later-times K] [--max-reconsume R]
 *             [--threads T] [--pull-batch B] [--consume-batch C] [--poll-namesrv-ms MS] [--quiet]
 *             [--access-key AK --secret-key SK]
 * </pre>
 *
 * Prints {@code ready}, a {@code msg} line per message received (with the answer given), a
 * {@code summary} every {@code --summary-ms}, and a final {@code summary} after stopping (with
 * {@code e2eP50Us}/{@code e2eP99Us}: from a producer's {@code bornNanos} to receipt, first
 * deliveries only). It stops
 * when {@code --count} distinct messages (by msgId) were consumed successfully (then lingers
 * {@code --linger-ms} to catch duplicates), when {@code --duration-ms} passed, or on stdin EOF /
 * SIGTERM. {@code --later-keys} (or {@code --later-all}) answers RECONSUME_LATER (orderly:
 * SUSPEND_CURRENT_QUEUE_A_MOMENT) for those messages while their reconsumeTimes is below
 * {@code --later-times} (default: always, so they end in %DLQ%group after --max-reconsume).
 * {@code --poll-namesrv-ms} sets the client's {@code pollNameServerInterval} (its route refresh,
 * 30 s by default).
 */
public final class PushConsume {
    private PushConsume() {}

    public static void main(String[] argv) {
        Apps.main("PushConsume", argv, PushConsume::run);
    }

    static void run(Args args) throws Exception {
        String namesrv = args.need("namesrv");
        String topic = args.need("topic");
        String group = args.need("group");
        String instance = args.get("instance", "consumer-" + ProcessHandle.current().pid());
        String sub = args.get("sub", "*");
        boolean orderly = args.flag("orderly");
        String from = args.get("from", "first");
        String timestamp = args.get("timestamp", null);
        boolean broadcast = args.flag("broadcast");
        long count = args.number("count", 0);
        long durationMs = args.number("duration-ms", 0);
        long lingerMs = args.number("linger-ms", 0);
        long summaryMs = args.number("summary-ms", 0);
        String laterKeysArg = args.get("later-keys", "");
        Set<String> laterKeys = new HashSet<>(laterKeysArg.isEmpty() ? List.of() : Arrays.asList(laterKeysArg.split(",")));
        boolean laterAll = args.flag("later-all");
        int laterTimes = args.integer("later-times", Integer.MAX_VALUE);
        int maxReconsume = args.integer("max-reconsume", -1);
        int threads = args.integer("threads", 4);
        int pullBatch = args.integer("pull-batch", 32);
        int consumeBatch = args.integer("consume-batch", 1);
        boolean quiet = args.flag("quiet");

        DefaultMQPushConsumer consumer =
            new DefaultMQPushConsumer(group, Apps.acl(args), new Rebalance(new AllocateMessageQueueAveragely()));
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance);
        consumer.subscribe(topic, sub);
        switch (from) {
            case "last":
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
                break;
            case "first":
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
                break;
            case "timestamp":
                consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_TIMESTAMP);
                if (timestamp != null) {
                    consumer.setConsumeTimestamp(timestamp);
                }
                break;
            default:
                throw new IllegalArgumentException("--from is last, first or timestamp");
        }
        if (broadcast) {
            Compat.broadcasting(consumer);
        }
        if (maxReconsume >= 0) {
            consumer.setMaxReconsumeTimes(maxReconsume);
        }
        consumer.setConsumeThreadMin(threads);
        consumer.setConsumeThreadMax(threads);
        consumer.setPullBatchSize(pullBatch);
        consumer.setConsumeMessageBatchMaxSize(consumeBatch);
        consumer.setVipChannelEnabled(false);
        consumer.setPollNameServerInterval(args.integer("poll-namesrv-ms", consumer.getPollNameServerInterval()));
        args.done();

        AtomicLong received = new AtomicLong();
        AtomicLong later = new AtomicLong();
        Set<String> done = ConcurrentHashMap.newKeySet();
        Map<String, AtomicLong> perBroker = new ConcurrentHashMap<>();
        AtomicLong duplicates = new AtomicLong();
        CountDownLatch enough = new CountDownLatch(1);

        java.util.concurrent.ConcurrentLinkedQueue<Long> e2eUs = new java.util.concurrent.ConcurrentLinkedQueue<>();
        java.util.function.Function<MessageExt, Boolean> handle = m -> {
            received.incrementAndGet();
            String born = m.getUserProperty("bornNanos");
            if (born != null && m.getReconsumeTimes() == 0) {
                e2eUs.add((System.nanoTime() - Long.parseLong(born)) / 1000L);
            }
            perBroker.computeIfAbsent(String.valueOf(m.getBrokerName()), k -> new AtomicLong()).incrementAndGet();
            boolean retry = (laterAll || (m.getKeys() != null && laterKeys.contains(m.getKeys())))
                && m.getReconsumeTimes() < laterTimes;
            if (retry) {
                later.incrementAndGet();
            } else if (!done.add(m.getMsgId())) {
                duplicates.incrementAndGet();
            }
            if (!quiet) {
                Out.line(Received.line(m, retry ? (orderly ? "SUSPEND" : "RECONSUME_LATER") : "SUCCESS"));
            }
            if (count > 0 && done.size() >= count) {
                enough.countDown();
            }
            return !retry;
        };
        if (orderly) {
            consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    if (!handle.apply(m)) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                boolean ok = true;
                for (MessageExt m : msgs) {
                    ok &= handle.apply(m);
                }
                return ok ? ConsumeConcurrentlyStatus.CONSUME_SUCCESS : ConsumeConcurrentlyStatus.RECONSUME_LATER;
            });
        }

        Apps.watchStop();
        consumer.start();
        Out.event("ready", "program", "PushConsume", "version", Compat.VERSION, "instance", instance,
            "group", group, "orderly", orderly);
        long start = System.nanoTime();
        java.util.function.Supplier<Map<String, Object>> summary = () -> {
            Map<String, Object> brokers = new TreeMap<>();
            perBroker.forEach((k, v) -> brokers.put(k, v.get()));
            return Json.obj("event", "summary", "program", "PushConsume", "received", received.get(),
                "consumed", (long) done.size(), "duplicates", duplicates.get(), "later", later.get(),
                "brokers", brokers, "elapsedMs", (System.nanoTime() - start) / 1_000_000L,
                "e2eP50Us", percentile(e2eUs, 50), "e2eP99Us", percentile(e2eUs, 99));
        };
        long deadline = durationMs > 0 ? System.nanoTime() + durationMs * 1_000_000L : Long.MAX_VALUE;
        long tick = summaryMs > 0 ? summaryMs : 200;
        while (!Apps.stopped() && System.nanoTime() < deadline) {
            if (enough.await(tick, TimeUnit.MILLISECONDS)) {
                break;
            }
            if (summaryMs > 0) {
                Out.line(summary.get());
            }
        }
        if (enough.getCount() == 0 && lingerMs > 0) {
            Apps.awaitStop(lingerMs);
        }
        // Persists the consumer offsets to the broker and unregisters the client.
        consumer.shutdown();
        Map<String, Object> last = summary.get();
        last.put("final", true);
        Out.line(last);
    }

    /** The {@code p}th percentile of {@code values} (nearest rank), or null when empty. */
    static Long percentile(java.util.Collection<Long> values, int p) {
        long[] sorted = values.stream().mapToLong(Long::longValue).sorted().toArray();
        if (sorted.length == 0) {
            return null;
        }
        int idx = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, idx))];
    }
}
