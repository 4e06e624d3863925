package logship.apps;

import java.io.File;
import java.util.Properties;

import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.namesrv.NamesrvConfig;
import org.apache.rocketmq.namesrv.NamesrvController;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * A real Apache NameServer in this process.
 *
 * <pre>Namesrv --port P [--dir D] [--set key=value]...</pre>
 *
 * {@code --port 0} picks a free port; the {@code ready} line names it. {@code --set} applies to
 * NamesrvConfig and NettyServerConfig, as namesrv.conf would. Stops on stdin EOF or SIGTERM.
 */
public final class Namesrv {
    private Namesrv() {}

    public static void main(String[] argv) {
        Apps.main("Namesrv", argv, Namesrv::run);
    }

    static void run(Args args) throws Exception {
        int port = args.integer("port", 0);
        String dir = args.get("dir", null);
        Properties props = new Properties();
        for (String kv : args.sets()) {
            int eq = kv.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("--set wants key=value, got " + kv);
            }
            props.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
        }
        args.done();
        Apps.watchStop();

        // As NamesrvStartup does: the version every request carries (0 otherwise, which a NameServer
        // takes for a pre-3.0.11 broker and whose topic configs it then drops).
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        NamesrvConfig namesrvConfig = new NamesrvConfig();
        NettyServerConfig nettyServerConfig = new NettyServerConfig();
        nettyServerConfig.setListenPort(port);
        if (dir != null) {
            new File(dir).mkdirs();
            namesrvConfig.setKvConfigPath(dir + File.separator + "kvConfig.json");
            namesrvConfig.setConfigStorePath(dir + File.separator + "namesrv.properties");
        }
        MixAll.properties2Object(props, namesrvConfig);
        MixAll.properties2Object(props, nettyServerConfig);

        NamesrvController controller = new NamesrvController(namesrvConfig, nettyServerConfig);
        if (!controller.initialize()) {
            throw new IllegalStateException("NamesrvController.initialize() returned false");
        }
        controller.start();
        int actual = controller.getRemotingServer().localListenPort();
        Out.event("ready", "program", "Namesrv", "port", actual, "addr", "127.0.0.1:" + actual,
            "version", Compat.VERSION);
        Apps.awaitStop(0);
        controller.shutdown();
        Out.event("stopped", "program", "Namesrv");
    }
}
