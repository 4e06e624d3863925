package logship.apps;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A DefaultLitePullConsumer in assign mode.
 *
 * <pre>
 * LitePull --namesrv ADDR --topic T --group G [--instance I]
 *          [--timestamp MILLIS | --seek begin|end] [--count N] [--duration-ms D] [--idle-ms MS]
 *          [--pull-batch B] [--commit] [--quiet] [--access-key AK --secret-key SK]
 * </pre>
 *
 * Assigns every queue of the topic, seeks each to {@code offsetForTimestamp(queue, timestamp)}
 * (a {@code seek} line per queue, with the offset the broker answered), or to its beginning or
 * end, then polls, printing a {@code msg} line per message, until {@code --count} messages (a
 * poll may overshoot it), {@code --idle-ms} without a message, the duration, or stdin EOF / SIGTERM; then a final {@code summary}. {@code --commit} commits the
 * offsets it consumed (auto-commit); by default it commits nothing.
 */
public final class LitePull {
    private LitePull() {}

    public static void main(String[] argv) {
        Apps.main("LitePull", argv, LitePull::run);
    }

    static void run(Args args) throws Exception {
        String namesrv = args.need("namesrv");
        String topic = args.need("topic");
        String group = args.need("group");
        String instance = args.get("instance", "litepull-" + ProcessHandle.current().pid());
        String timestamp = args.get("timestamp", null);
        String seek = args.get("seek", timestamp == null ? "begin" : null);
        long count = args.number("count", 0);
        long durationMs = args.number("duration-ms", 30000);
        long idleMs = args.number("idle-ms", 0);
        int pullBatch = args.integer("pull-batch", 32);
        boolean commit = args.flag("commit");
        boolean quiet = args.flag("quiet");

        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(group, Apps.acl(args));
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance);
        consumer.setAutoCommit(commit);
        consumer.setPullBatchSize(pullBatch);
        consumer.setVipChannelEnabled(false);
        args.done();
        Apps.watchStop();
        consumer.start();
        Collection<MessageQueue> found = consumer.fetchMessageQueues(topic);
        List<MessageQueue> queues = new ArrayList<>(found);
        queues.sort(Comparator.comparing(MessageQueue::getBrokerName).thenComparingInt(MessageQueue::getQueueId));
        consumer.assign(queues);
        for (MessageQueue q : queues) {
            Long offset = null;
            if (timestamp != null) {
                offset = consumer.offsetForTimestamp(q, Long.parseLong(timestamp));
                consumer.seek(q, offset);
            } else if ("end".equals(seek)) {
                consumer.seekToEnd(q);
            } else {
                consumer.seekToBegin(q);
            }
            Out.event("seek", "broker", q.getBrokerName(), "queue", q.getQueueId(), "offset", offset,
                "timestamp", timestamp == null ? null : Long.parseLong(timestamp), "to", timestamp == null ? seek : "timestamp");
        }
        Out.event("ready", "program", "LitePull", "version", Compat.VERSION, "instance", instance,
            "queues", queues.size());
        long start = System.nanoTime();
        long deadline = durationMs > 0 ? start + durationMs * 1_000_000L : Long.MAX_VALUE;
        long received = 0;
        long lastMessage = System.nanoTime();
        while (!Apps.stopped() && System.nanoTime() < deadline && (count <= 0 || received < count)) {
            if (idleMs > 0 && System.nanoTime() - lastMessage > idleMs * 1_000_000L) {
                break;
            }
            for (MessageExt m : consumer.poll(200)) {
                lastMessage = System.nanoTime();
                received++;
                if (!quiet) {
                    Out.line(Received.line(m, null));
                }
            }
        }
        if (commit) {
            consumer.commitSync();
        }
        consumer.shutdown();
        Out.event("summary", "program", "LitePull", "received", received, "final", true,
            "elapsedMs", (System.nanoTime() - start) / 1_000_000L);
    }
}
