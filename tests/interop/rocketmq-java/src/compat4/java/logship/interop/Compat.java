package logship.interop;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/** What differs between RocketMQ 4.9.x and 5.x for the harness: 4.9.x. */
final class Compat {
    static final String HA_SERVICE = "HAService";

    private Compat() {}

    /** Opens a store; 4.9.x has no controller mode, so {@code controllerMode} must be false. */
    static DefaultMessageStore open(MessageStoreConfig config, long brokerId, boolean controllerMode) throws Exception {
        if (controllerMode) {
            throw new UnsupportedOperationException("RocketMQ 4.9.x has no controller mode");
        }
        BrokerConfig broker = new BrokerConfig();
        broker.setBrokerId(brokerId);
        return new DefaultMessageStore(config, new BrokerStatsManager("interop", true), null, broker);
    }

    /** 4.9.x has no replica counts: a SYNC_MASTER waits for one slave. */
    static void replicas(MessageStoreConfig config, int total, int inSync) {}

    static MessageExt newMessage() {
        return new MessageExtBrokerInner();
    }

    static void setPropertiesString(MessageExt message, String properties) {
        ((MessageExtBrokerInner) message).setPropertiesString(properties);
    }

    static PutMessageResult put(DefaultMessageStore store, MessageExt message) {
        return store.putMessage((MessageExtBrokerInner) message);
    }

    /** 4.9.x: getOffsetInQueueByTime has no boundary type (the nearest message). */
    static long searchByTime(DefaultMessageStore store, String topic, int queueId, long timestamp, String boundary) {
        return store.getOffsetInQueueByTime(topic, queueId, timestamp);
    }
}
