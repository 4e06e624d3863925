package logship.interop;

import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/** What differs between RocketMQ 4.9.x and 5.x for the harness: 5.x. */
final class Compat {
    static final String HA_SERVICE = "DefaultHAService";

    private Compat() {}

    /** Opens a store; {@code controllerMode} selects AutoSwitchHAService. */
    static DefaultMessageStore open(MessageStoreConfig config, long brokerId, boolean controllerMode) throws Exception {
        BrokerConfig broker = new BrokerConfig();
        broker.setBrokerId(brokerId);
        broker.setEnableControllerMode(controllerMode);
        return new DefaultMessageStore(config, new BrokerStatsManager("interop", true), null, broker, new ConcurrentHashMap<>());
    }

    /** 5.x counts the master: inSyncReplicas = 2 makes a SYNC_MASTER wait for one slave. */
    static void replicas(MessageStoreConfig config, int total, int inSync) {
        config.setTotalReplicas(total);
        config.setInSyncReplicas(inSync);
    }

    static MessageExt newMessage() {
        return new MessageExtBrokerInner();
    }

    static void setPropertiesString(MessageExt message, String properties) {
        ((MessageExtBrokerInner) message).setPropertiesString(properties);
    }

    static PutMessageResult put(DefaultMessageStore store, MessageExt message) {
        return store.putMessage((MessageExtBrokerInner) message);
    }

    /** 5.x: getOffsetInQueueByTime with BoundaryType LOWER or UPPER. */
    static long searchByTime(DefaultMessageStore store, String topic, int queueId, long timestamp, String boundary) {
        return store.getOffsetInQueueByTime(topic, queueId, timestamp,
            org.apache.rocketmq.common.BoundaryType.valueOf(boundary));
    }
}
