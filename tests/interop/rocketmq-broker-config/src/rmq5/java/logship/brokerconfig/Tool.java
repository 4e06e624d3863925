package logship.brokerconfig;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentMap;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.broker.offset.ConsumerOffsetManager;
import org.apache.rocketmq.broker.schedule.ScheduleMessageService;
import org.apache.rocketmq.broker.subscription.SubscriptionGroupManager;
import org.apache.rocketmq.broker.topic.TopicConfigManager;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.DataVersion;
import org.apache.rocketmq.remoting.protocol.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.store.MessageStore;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * RocketMQ 5.x's broker metadata managers on a store directory.
 *
 * <pre>
 *   write ROOT   runs the scenario of broker/tests/java_config_files.rs through Java's managers
 *   dump ROOT OUT  loads ROOT/config with Java's managers and writes their content to OUT, one
 *                  sorted line each (a file: the shaded logback prints its status on stdout)
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
        BrokerController controller = controller(args[1]);
        if (args[0].equals("write")) {
            write(controller);
        } else if (args[0].equals("dump")) {
            java.nio.file.Files.writeString(java.nio.file.Path.of(args[2]), dump(controller));
        } else {
            System.err.println("unknown command " + args[0]);
            System.exit(2);
        }
        System.out.flush();
        System.exit(0);
    }

    static BrokerController controller(String root) {
        BrokerConfig broker = new BrokerConfig();
        broker.setBrokerClusterName("LogshipCluster");
        broker.setBrokerName("broker-a");
        broker.setAutoCreateTopicEnable(true);
        MessageStoreConfig store = new MessageStoreConfig();
        store.setStorePathRootDir(root);
        store.setStorePathCommitLog(root + File.separator + "commitlog");
        BrokerController controller = new BrokerController(broker, new NettyServerConfig(), new NettyClientConfig(), store);
        // ScheduleMessageService finds its file through the message store; a stand-in that
        // answers with the store config (and zero or null for everything else) is enough.
        MessageStore stand = (MessageStore) Proxy.newProxyInstance(MessageStore.class.getClassLoader(),
            new Class<?>[] {MessageStore.class}, (proxy, method, args) -> {
                if (method.getName().equals("getMessageStoreConfig")) {
                    return store;
                }
                Class<?> r = method.getReturnType();
                if (r == long.class) {
                    return 0L;
                } else if (r == int.class) {
                    return 0;
                } else if (r == boolean.class) {
                    return false;
                }
                return null;
            });
        try {
            Field f = BrokerController.class.getDeclaredField("messageStore");
            f.setAccessible(true);
            f.set(controller, stand);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
        return controller;
    }

    static void write(BrokerController c) throws Exception {
        TopicConfigManager topics = c.getTopicConfigManager();
        check(topics.load(), "topics load");
        String addr = "127.0.0.1:5000";
        topics.createTopicInSendMessageMethod("TopicA", "TBW102", addr, 4, 0);
        topics.createTopicInSendMessageMethod("TopicBig", "TBW102", addr, 16, 0);
        topics.createTopicInSendMessageBackMethod("%RETRY%GroupA", 1, PermName.PERM_WRITE | PermName.PERM_READ, 0);
        topics.createTopicInSendMessageBackMethod("%DLQ%GroupA", 1, PermName.PERM_WRITE | PermName.PERM_READ, 0);
        TopicConfig order = new TopicConfig("OrderTopic", 2, 2, PermName.PERM_READ | PermName.PERM_WRITE);
        order.setOrder(true);
        Map<String, String> attributes = new HashMap<>();
        attributes.put("+message.type", "FIFO");
        order.setAttributes(attributes);
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
        b.setConsumeMessageOrderly(true);
        b.setConsumeTimeoutMinute(20);
        groups.updateSubscriptionGroupConfig(b);
        groups.setForbidden("GroupA", "TopicA", 1);
        groups.deleteSubscriptionGroupConfig("CID_ONSAPI_OWNER");

        ScheduleMessageService schedule = c.getScheduleMessageService();
        check(schedule.loadWhenSyncDelayOffset(), "delay offsets load");
        Method update = ScheduleMessageService.class.getDeclaredMethod("updateOffset", int.class, long.class);
        update.setAccessible(true);
        update.invoke(schedule, 1, 10L);
        update.invoke(schedule, 3, 7L);
        update.invoke(schedule, 18, 0L);
        schedule.persist();
        update.invoke(schedule, 3, 8L);
        schedule.persist();
    }

    static String version(DataVersion v) {
        if (v == null) {
            return "null";
        }
        return "timestamp=" + v.getTimestamp() + " counter=" + v.getCounter().get() + " stateVersion=" + v.getStateVersion();
    }

    static String dump(BrokerController c) throws Exception {
        Dump d = new Dump();
        TopicConfigManager topics = c.getTopicConfigManager();
        check(topics.load(), "topics load");
        for (TopicConfig t : topics.getTopicConfigTable().values()) {
            d.add("topic " + t.getTopicName() + " read=" + t.getReadQueueNums() + " write=" + t.getWriteQueueNums()
                + " perm=" + t.getPerm() + " filter=" + t.getTopicFilterType() + " sysflag=" + t.getTopicSysFlag()
                + " order=" + t.isOrder() + " attributes=" + Dump.attrs(t.getAttributes()));
        }
        d.add("topics.dataVersion " + version(topics.getDataVersion()));

        ConsumerOffsetManager offsets = c.getConsumerOffsetManager();
        check(offsets.load(), "offsets load");
        for (Map.Entry<String, ConcurrentMap<Integer, Long>> e : offsets.getOffsetTable().entrySet()) {
            for (Map.Entry<Integer, Long> q : e.getValue().entrySet()) {
                d.add("offset " + e.getKey() + " " + q.getKey() + " " + q.getValue());
            }
        }
        d.add("offsets.dataVersion " + version(offsets.getDataVersion()));

        SubscriptionGroupManager groups = c.getSubscriptionGroupManager();
        check(groups.load(), "groups load");
        for (SubscriptionGroupConfig g : groups.getSubscriptionGroupTable().values()) {
            d.add("group " + g.getGroupName() + " consumeEnable=" + g.isConsumeEnable()
                + " consumeFromMinEnable=" + g.isConsumeFromMinEnable()
                + " consumeBroadcastEnable=" + g.isConsumeBroadcastEnable()
                + " consumeMessageOrderly=" + g.isConsumeMessageOrderly()
                + " retryQueueNums=" + g.getRetryQueueNums() + " retryMaxTimes=" + g.getRetryMaxTimes()
                + " brokerId=" + g.getBrokerId() + " whichBrokerWhenConsumeSlowly=" + g.getWhichBrokerWhenConsumeSlowly()
                + " notifyConsumerIdsChangedEnable=" + g.isNotifyConsumerIdsChangedEnable()
                + " groupSysFlag=" + g.getGroupSysFlag() + " consumeTimeoutMinute=" + g.getConsumeTimeoutMinute()
                + " retryPolicy=" + (g.getGroupRetryPolicy() == null ? "null" : g.getGroupRetryPolicy().getType())
                + " attributes=" + Dump.attrs(g.getAttributes()));
        }
        for (Map.Entry<String, ConcurrentMap<String, Integer>> e : groups.getForbiddenTable().entrySet()) {
            for (Map.Entry<String, Integer> t : e.getValue().entrySet()) {
                d.add("forbidden " + e.getKey() + " " + t.getKey() + " " + t.getValue());
            }
        }
        d.add("groups.dataVersion " + version(groups.getDataVersion()));

        ScheduleMessageService schedule = c.getScheduleMessageService();
        check(schedule.loadWhenSyncDelayOffset(), "delay offsets load");
        Field table = ScheduleMessageService.class.getDeclaredField("offsetTable");
        table.setAccessible(true);
        @SuppressWarnings("unchecked")
        Map<Integer, Long> delay = (Map<Integer, Long>) table.get(schedule);
        for (Map.Entry<Integer, Long> e : delay.entrySet()) {
            d.add("delay " + e.getKey() + " " + e.getValue());
        }
        d.add("delay.dataVersion " + version(schedule.getDataVersion()));
        return d.text();
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what + " failed");
        }
    }
}
