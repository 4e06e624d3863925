package logship.interop;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.rocketmq.remoting.protocol.EpochEntry;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.ha.HAClient;
import org.apache.rocketmq.store.ha.autoswitch.AutoSwitchHAService;

/**
 * Controller mode (RocketMQ 5.x, {@code enableControllerMode=true}): the store runs
 * AutoSwitchHAService, and the harness plays the controller's part by calling the role changes
 * and setting the sync-state-set itself.
 */
final class AutoSwitch {
    /** This build can run the AutoSwitch protocol. */
    static final boolean SUPPORTED = true;

    private AutoSwitch() {}

    private static AutoSwitchHAService service(DefaultMessageStore store) {
        return (AutoSwitchHAService) store.getHaService();
    }

    /** Tells the service which broker it is (the broker's ReplicasManager does this). */
    /** allAckInSyncStateSet, minInSyncReplicas, syncFromLastFile, asyncLearner. */
    static void configure(MessageStoreConfig config, boolean allAck, int minInSync, boolean syncFromLastFile,
        boolean asyncLearner) {
        config.setAllAckInSyncStateSet(allAck);
        config.setMinInSyncReplicas(minInSync);
        config.setSyncFromLastFile(syncFromLastFile);
        config.setAsyncLearner(asyncLearner);
    }

    static void init(DefaultMessageStore store, long brokerId) {
        service(store).setLocalBrokerId(brokerId);
    }

    static boolean changeToMaster(DefaultMessageStore store, int epoch) throws Exception {
        return service(store).changeToMaster(epoch);
    }

    /** Follows the master at {@code haAddress}; {@code brokerId} is this (the slave's) broker id. */
    static boolean changeToSlave(DefaultMessageStore store, String haAddress, int epoch, long brokerId) {
        AutoSwitchHAService s = service(store);
        boolean ok = s.changeToSlave("", epoch, brokerId);
        if (ok) {
            s.updateHaMasterAddress(haAddress);
        }
        return ok;
    }

    static void setSyncStateSet(DefaultMessageStore store, Set<Long> ids) {
        service(store).setSyncStateSet(ids);
    }

    /** Epochs, sync-state-set and HA client state, for the harness's status line. */
    static void status(DefaultMessageStore store, Map<String, Object> into) {
        AutoSwitchHAService s = service(store);
        List<Object> epochs = new ArrayList<>();
        for (EpochEntry e : s.getEpochEntries()) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("epoch", e.getEpoch());
            m.put("startOffset", e.getStartOffset());
            epochs.add(m);
        }
        into.put("epochs", epochs);
        into.put("lastEpoch", s.getLastEpoch());
        into.put("syncStateSet", new ArrayList<>(new TreeSet<>(s.getSyncStateSet())));
        into.put("localSyncStateSet", new ArrayList<>(new TreeSet<>(s.getLocalSyncStateSet())));
        into.put("synchronizingSyncStateSet", s.isSynchronizingSyncStateSet());
        HAClient client = s.getHAClient();
        into.put("haClientState", client == null ? null : String.valueOf(client.getCurrentState()));
        into.put("masterHaAddress", client == null ? null : client.getHaMasterAddress());
        // The epoch file as Java wrote it (epochFileCheckpoint), or null before its first write.
        File file = new File(store.getMessageStoreConfig().getStorePathEpochFile());
        String text;
        try {
            text = file.exists() ? new String(Files.readAllBytes(file.toPath()), StandardCharsets.UTF_8) : null;
        } catch (IOException e) {
            text = "unreadable: " + e;
        }
        into.put("epochFile", text);
    }
}
