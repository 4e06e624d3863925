package logship.apps;

import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.util.Properties;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.store.MessageStore;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * A real Apache RocketMQ broker (BrokerController) in this process.
 *
 * <pre>Broker [--conf broker.conf] [--set key=value]...</pre>
 *
 * The properties (the file first, then each {@code --set}) go to BrokerConfig, NettyServerConfig,
 * NettyClientConfig and MessageStoreConfig through RocketMQ's own {@code MixAll.properties2Object},
 * as {@code mqbroker -c} loads them, with the same role rules as BrokerStartup: a master is
 * brokerId 0, a SLAVE needs brokerId > 0, haListenPort defaults to listenPort + 1. Test-friendly
 * defaults come first (1 MiB commit-log files, 127.0.0.1, a disk-usage limit the host cannot hit);
 * any property given overrides them. Prints {@code ready}; then each stdin line {@code status}
 * answers a {@code status} line; stops cleanly on stdin EOF or SIGTERM.
 */
public final class Broker {
    private Broker() {}

    public static void main(String[] argv) {
        Apps.main("Broker", argv, Broker::run);
    }

    static Properties defaults() {
        Properties p = new Properties();
        p.setProperty("brokerIP1", "127.0.0.1");
        p.setProperty("brokerIP2", "127.0.0.1");
        p.setProperty("brokerClusterName", "LogshipCluster");
        p.setProperty("mappedFileSizeCommitLog", Integer.toString(1024 * 1024));
        // 20-byte consume-queue units: 10,000 per file.
        p.setProperty("mappedFileSizeConsumeQueue", Integer.toString(20 * 10000));
        p.setProperty("autoCreateTopicEnable", "true");
        p.setProperty("autoCreateSubscriptionGroup", "true");
        p.setProperty("flushDiskType", "ASYNC_FLUSH");
        // The host's disk is not under test.
        p.setProperty("diskMaxUsedSpaceRatio", "99");
        p.setProperty("transientStorePoolEnable", "false");
        // Small thread pools: many brokers share two cores in CI.
        p.setProperty("sendMessageThreadPoolNums", "2");
        p.setProperty("pullMessageThreadPoolNums", "4");
        p.setProperty("serverWorkerThreads", "4");
        p.setProperty("clientWorkerThreads", "2");
        return p;
    }

    static void run(Args args) throws Exception {
        Properties props = defaults();
        String conf = args.get("conf", null);
        if (conf != null) {
            try (InputStream in = new FileInputStream(conf)) {
                props.load(in);
            }
        }
        for (String kv : args.sets()) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--set wants key=value, got " + kv);
            }
            props.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
        }
        args.done();
        if (!props.containsKey("storePathRootDir")) {
            throw new IllegalArgumentException("set storePathRootDir (the broker's store directory)");
        }
        if (!props.containsKey("storePathCommitLog")) {
            props.setProperty("storePathCommitLog",
                props.getProperty("storePathRootDir") + File.separator + "commitlog");
        }
        BrokerController[] running = new BrokerController[1];
        Apps.watchStop(line -> command(running[0], line));

        // As BrokerStartup does: the version every request carries (0 otherwise, which a NameServer
        // takes for a pre-3.0.11 broker and whose topic configs it then drops).
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        BrokerConfig brokerConfig = new BrokerConfig();
        NettyServerConfig nettyServerConfig = new NettyServerConfig();
        NettyClientConfig nettyClientConfig = new NettyClientConfig();
        MessageStoreConfig messageStoreConfig = new MessageStoreConfig();
        nettyServerConfig.setListenPort(10911);
        messageStoreConfig.setHaListenPort(0);
        MixAll.properties2Object(props, brokerConfig);
        MixAll.properties2Object(props, nettyServerConfig);
        MixAll.properties2Object(props, nettyClientConfig);
        MixAll.properties2Object(props, messageStoreConfig);
        if (brokerConfig.getRocketmqHome() == null) {
            brokerConfig.setRocketmqHome(System.getProperty(MixAll.ROCKETMQ_HOME_PROPERTY));
        }
        BrokerRole role = messageStoreConfig.getBrokerRole();
        if (role == BrokerRole.SLAVE) {
            if (brokerConfig.getBrokerId() <= MixAll.MASTER_ID) {
                throw new IllegalArgumentException("a SLAVE needs brokerId > 0");
            }
            // accessMessageInMemoryMaxRatio as configured: 5.5.0's BrokerStartup leaves it, and
            // 4.9.7's lowers it by 10 only for the default config's role, read before the
            // properties (ASYNC_MASTER), so never.
        } else {
            brokerConfig.setBrokerId(MixAll.MASTER_ID);
        }
        if (messageStoreConfig.getHaListenPort() <= 0) {
            messageStoreConfig.setHaListenPort(nettyServerConfig.getListenPort() + 1);
        }

        BrokerController controller =
            new BrokerController(brokerConfig, nettyServerConfig, nettyClientConfig, messageStoreConfig);
        controller.getConfiguration().registerConfig(props);
        if (!controller.initialize()) {
            controller.shutdown();
            throw new IllegalStateException("BrokerController.initialize() returned false");
        }
        controller.start();
        running[0] = controller;
        Out.event("ready", "program", "Broker", "version", Compat.VERSION,
            "brokerName", brokerConfig.getBrokerName(), "brokerId", brokerConfig.getBrokerId(),
            "cluster", brokerConfig.getBrokerClusterName(), "role", role.name(),
            "addr", brokerConfig.getBrokerIP1() + ":" + nettyServerConfig.getListenPort(),
            "haAddr", brokerConfig.getBrokerIP2() + ":" + messageStoreConfig.getHaListenPort(),
            "namesrvAddr", brokerConfig.getNamesrvAddr());

        Apps.awaitStop(0);
        controller.shutdown();
        Out.event("stopped", "program", "Broker");
    }

    /** Answers one stdin line: {@code status}. */
    static void command(BrokerController controller, String line) {
        if (controller == null) {
            Out.event("error", "message", "the broker is not started yet");
        } else if (line.trim().equals("status")) {
            MessageStore store = controller.getMessageStore();
            Object connections = Apps.call(store, "getHaService", "getConnectionCount");
            Out.event("status", "maxPhyOffset", store.getMaxPhyOffset(),
                "minPhyOffset", store.getMinPhyOffset(),
                "haConnections", connections == null ? null : ((Number) connections).intValue(),
                "masterAddr", Apps.call(controller, "getSlaveSynchronize", "getMasterAddr"));
        } else {
            Out.event("error", "message", "unknown command " + line.trim());
        }
    }
}
