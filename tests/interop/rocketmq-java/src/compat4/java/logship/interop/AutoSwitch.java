package logship.interop;

import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/** RocketMQ 4.9.x has no controller mode: the harness refuses {@code --mode autoswitch}. */
final class AutoSwitch {
    /** This build cannot run the AutoSwitch protocol. */
    static final boolean SUPPORTED = false;

    private AutoSwitch() {}

    private static UnsupportedOperationException unsupported() {
        return new UnsupportedOperationException("AutoSwitch HA needs RocketMQ 5.x; this harness is built for 4.9.x");
    }

    /** allAckInSyncStateSet, minInSyncReplicas, syncFromLastFile, asyncLearner. */
    static void configure(MessageStoreConfig config, boolean allAck, int minInSync, boolean syncFromLastFile,
        boolean asyncLearner) {
        throw unsupported();
    }

    static void init(DefaultMessageStore store, long brokerId) {
        throw unsupported();
    }

    static boolean changeToMaster(DefaultMessageStore store, int epoch) {
        throw unsupported();
    }

    static boolean changeToSlave(DefaultMessageStore store, String haAddress, int epoch, long brokerId) {
        throw unsupported();
    }

    static void setSyncStateSet(DefaultMessageStore store, Set<Long> ids) {
        throw unsupported();
    }

    static void status(DefaultMessageStore store, Map<String, Object> into) {
        throw unsupported();
    }
}
