package logship.brokerconfig;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.ConcurrentMap;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.broker.offset.ConsumerOffsetManager;
import org.apache.rocketmq.broker.subscription.SubscriptionGroupManager;
import org.apache.rocketmq.broker.topic.TopicConfigManager;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.DataVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.schedule.ScheduleMessageService;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * RocketMQ 4.9.x's broker metadata managers on a store directory.
 *
 * <pre>
 *   write ROOT     runs the scenario of broker/tests/java_config_files.rs through Java's managers
 *   dump ROOT OUT  loads ROOT/config with Java's managers and writes their content to OUT, one
 *                  sorted line each
 * </pre>
 */
public final class Tool {
    private Tool() {}

    public static void main(String[] args) {
        // Exit on any failure: the store's threads would keep a failed run alive.
        try {
            run(args);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
    }

    static void run(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Tool write ROOT | Tool dump ROOT OUT");
            System.exit(2);
        }
        BrokerConfig broker = new BrokerConfig();
        broker.setBrokerClusterName("LogshipCluster");
        broker.setBrokerName("broker-a");
        broker.setAutoCreateTopicEnable(true);
        MessageStoreConfig store = new MessageStoreConfig();
        store.setStorePathRootDir(args[1]);
        store.setStorePathCommitLog(args[1] + File.separator + "commitlog");
        BrokerController controller = new BrokerController(broker, new NettyServerConfig(), new NettyClientConfig(), store);
        // ScheduleMessageService of 4.9 lives in the store and finds its file through it.
        DefaultMessageStore messageStore = new DefaultMessageStore(store, new BrokerStatsManager("interop", true), null, broker);
        ScheduleMessageService schedule = new ScheduleMessageService(messageStore);
        if (args[0].equals("write")) {
            write(controller, schedule);
        } else if (args[0].equals("dump")) {
            java.nio.file.Files.writeString(java.nio.file.Path.of(args[2]), dump(controller, schedule));
        } else {
            System.err.println("unknown command " + args[0]);
            System.exit(2);
        }
        System.exit(0);
    }

    static void write(BrokerController c, ScheduleMessageService schedule) throws Exception {
        TopicConfigManager topics = c.getTopicConfigManager();
        check(topics.load(), "topics load");
        String addr = "127.0.0.1:5000";
        topics.createTopicInSendMessageMethod("TopicA", "TBW102", addr, 4, 0);
        topics.createTopicInSendMessageMethod("TopicBig", "TBW102", addr, 16, 0);
        topics.createTopicInSendMessageBackMethod("%RETRY%GroupA", 1, PermName.PERM_WRITE | PermName.PERM_READ, 0);
        topics.createTopicInSendMessageBackMethod("%DLQ%GroupA", 1, PermName.PERM_WRITE | PermName.PERM_READ, 0);
        TopicConfig order = new TopicConfig("OrderTopic", 2, 2, PermName.PERM_READ | PermName.PERM_WRITE);
        order.setOrder(true);
        topics.updateTopicConfig(order);
        topics.deleteTopicConfig("TopicBig");
        topics.deleteTopicConfig("SELF_TEST_TOPIC");

        ConsumerOffsetManager offsets = c.getConsumerOffsetManager();
        check(offsets.load(), "offsets load");
        offsets.commitOffset(addr, "GroupA", "TopicA", 0, 12);
        offsets.commitOffset(addr, "GroupA", "TopicA", 1, 3);
        offsets.commitOffset(addr, "GroupA", "TopicA", 2, 0);
        offsets.commitOffset(addr, "GroupA", "TopicA", 3, 1234567890123L);
        offsets.commitOffset(addr, "GroupA", "%RETRY%GroupA", 0, 5);
        offsets.commitOffset(addr, "GroupB", "TopicA", 0, 7);
        offsets.persist();
        offsets.commitOffset(addr, "GroupA", "TopicA", 1, 4);
        offsets.persist();

        SubscriptionGroupManager groups = c.getSubscriptionGroupManager();
        check(groups.load(), "groups load");
        groups.findSubscriptionGroupConfig("GroupA");
        SubscriptionGroupConfig b = new SubscriptionGroupConfig();
        b.setGroupName("GroupB");
        b.setRetryMaxTimes(3);
        b.setConsumeBroadcastEnable(false);
        b.setWhichBrokerWhenConsumeSlowly(2);
        groups.updateSubscriptionGroupConfig(b);
        groups.deleteSubscriptionGroupConfig("CID_ONSAPI_OWNER");

        load(schedule);
        Method update = ScheduleMessageService.class.getDeclaredMethod("updateOffset", int.class, long.class);
        update.setAccessible(true);
        update.invoke(schedule, 1, 10L);
        update.invoke(schedule, 3, 7L);
        update.invoke(schedule, 18, 0L);
        schedule.persist();
        update.invoke(schedule, 3, 8L);
        schedule.persist();
    }

    /**
     * ConfigManager.load (the file, then its .bak when the file is missing, empty or does not
     * decode) without 4.9's correctDelayOffset, which would clamp to the empty queues here.
     */
    static void load(ScheduleMessageService schedule) throws Exception {
        String json = MixAll.file2String(schedule.configFilePath());
        boolean loaded = false;
        if (json != null && !json.isEmpty()) {
            try {
                schedule.decode(json);
                loaded = true;
            } catch (RuntimeException e) {
                System.err.println("delay offsets do not decode; trying the backup: " + e);
            }
        }
        if (!loaded) {
            json = MixAll.file2String(schedule.configFilePath() + ".bak");
            if (json != null && !json.isEmpty()) {
                schedule.decode(json);
            }
        }
        check(schedule.parseDelayLevel(), "delay levels");
    }

    static String version(DataVersion v) {
        if (v == null) {
            return "null";
        }
        return "timestamp=" + v.getTimestamp() + " counter=" + v.getCounter().get();
    }

    static String dump(BrokerController c, ScheduleMessageService schedule) throws Exception {
        Dump d = new Dump();
        TopicConfigManager topics = c.getTopicConfigManager();
        check(topics.load(), "topics load");
        for (TopicConfig t : topics.getTopicConfigTable().values()) {
            d.add("topic " + t.getTopicName() + " read=" + t.getReadQueueNums() + " write=" + t.getWriteQueueNums()
                + " perm=" + t.getPerm() + " filter=" + t.getTopicFilterType() + " sysflag=" + t.getTopicSysFlag()
                + " order=" + t.isOrder());
        }
        d.add("topics.dataVersion " + version(topics.getDataVersion()));

        ConsumerOffsetManager offsets = c.getConsumerOffsetManager();
        check(offsets.load(), "offsets load");
        for (Map.Entry<String, ConcurrentMap<Integer, Long>> e : offsets.getOffsetTable().entrySet()) {
            for (Map.Entry<Integer, Long> q : e.getValue().entrySet()) {
                d.add("offset " + e.getKey() + " " + q.getKey() + " " + q.getValue());
            }
        }

        SubscriptionGroupManager groups = c.getSubscriptionGroupManager();
        check(groups.load(), "groups load");
        for (SubscriptionGroupConfig g : groups.getSubscriptionGroupTable().values()) {
            d.add("group " + g.getGroupName() + " consumeEnable=" + g.isConsumeEnable()
                + " consumeFromMinEnable=" + g.isConsumeFromMinEnable()
                + " consumeBroadcastEnable=" + g.isConsumeBroadcastEnable()
                + " retryQueueNums=" + g.getRetryQueueNums() + " retryMaxTimes=" + g.getRetryMaxTimes()
                + " brokerId=" + g.getBrokerId() + " whichBrokerWhenConsumeSlowly=" + g.getWhichBrokerWhenConsumeSlowly()
                + " notifyConsumerIdsChangedEnable=" + g.isNotifyConsumerIdsChangedEnable());
        }
        d.add("groups.dataVersion " + version(groups.getDataVersion()));

        load(schedule);
        Field table = ScheduleMessageService.class.getDeclaredField("offsetTable");
        table.setAccessible(true);
        @SuppressWarnings("unchecked")
        Map<Integer, Long> delay = (Map<Integer, Long>) table.get(schedule);
        for (Map.Entry<Integer, Long> e : delay.entrySet()) {
            d.add("delay " + e.getKey() + " " + e.getValue());
        }
        return d.text();
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what + " failed");
        }
    }
}
