package logship.apps;

import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A consumer's queue allocation, printed: a {@code rebalance} line each time the client
 * allocates (topic, how many consumers the group has, the queues this one got), so that a test
 * can wait for a group to settle. The allocation itself is the wrapped strategy's.
 */
final class Rebalance implements AllocateMessageQueueStrategy {
    private final AllocateMessageQueueStrategy inner;
    private final java.util.Map<String, String> last = new java.util.concurrent.ConcurrentHashMap<>();

    Rebalance(AllocateMessageQueueStrategy inner) {
        this.inner = inner;
    }

    @Override
    public List<MessageQueue> allocate(String group, String currentCID, List<MessageQueue> mqAll,
        List<String> cidAll) {
        List<MessageQueue> mine = inner.allocate(group, currentCID, mqAll, cidAll);
        List<Object> queues = new ArrayList<>();
        String topic = mqAll.isEmpty() ? null : mqAll.get(0).getTopic();
        for (MessageQueue q : mine) {
            queues.add(Json.obj("broker", q.getBrokerName(), "queue", q.getQueueId()));
        }
        String line = Json.write(Json.obj("topic", topic, "consumers", cidAll.size(), "queues", queues));
        // Once per change: the client allocates every 20 s even when nothing changed.
        if (!line.equals(last.put(String.valueOf(topic), line))) {
            Out.event("rebalance", "topic", topic, "consumers", cidAll.size(), "allQueues", mqAll.size(),
                "queues", queues);
        }
        return mine;
    }

    @Override
    public String getName() {
        return inner.getName();
    }
}
