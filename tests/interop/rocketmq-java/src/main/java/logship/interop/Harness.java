package logship.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * Runs one Apache RocketMQ DefaultMessageStore (no NameServer, no broker) as a master or a
 * slave and answers commands read from stdin, one per line, with one JSON object per line on
 * stdout. Every command's answer ends with a line holding "end": true.
 *
 * <p>Arguments: --role ASYNC_MASTER|SYNC_MASTER|SLAVE --store DIR --segment BYTES [--ha-port N]
 * [--master HOST:PORT] [--slave-timeout MS] [--housekeeping MS] [--heartbeat MS] [--topic T]
 * [--queues N].
 *
 * <p>Commands: put COUNT SIZE [TOPIC] | status | wait-dispatch | look OFFSET | queue QUEUE_ID [TOPIC] |
 * master HOST:PORT | shutdown.
 *
 * <p>Store queries, for logship's store/src/query.rs (tests/interop_store_queries.rs): {@code getmsg
 * TOPIC QUEUE_ID OFFSET MAX EXPR} (DefaultMessageStore.getMessage with a TAG filter: EXPR is
 * {@code *} or tags joined by {@code ||}), {@code search TOPIC QUEUE_ID TIMESTAMP LOWER|UPPER}
 * (getOffsetInQueueByTime; 4.9 has no boundary type and ignores it), {@code earliest TOPIC
 * QUEUE_ID}, {@code storetime TOPIC QUEUE_ID OFFSET}, {@code select PHYSICAL_OFFSET}
 * (selectOneMessageByOffset), {@code putkeys COUNT TOPIC} (messages with KEYS "k-i shared-(i%5)" and
 * UNIQ_KEY "U-i"), {@code querymsg TOPIC KEY MAX BEGIN END} (queryMessage: the index). Options:
 * [--cq-file-size BYTES] (mappedFileSizeConsumeQueue) [--access-ratio N]
 * (accessMessageInMemoryMaxRatio) [--index-slots N] (maxHashSlotNum) [--index-num N] (maxIndexNum).
 *
 * <p>Controller mode (RocketMQ 5.x only; the 4.9.x build refuses it): {@code --mode autoswitch
 * --broker-id N} runs the store with {@code enableControllerMode=true} (AutoSwitchHAService). The
 * store starts as a SLAVE following nobody, as a broker does until its controller speaks; the
 * harness then plays the controller: {@code changeToMaster EPOCH} (the store takes --role, which
 * must be ASYNC_MASTER or SYNC_MASTER), {@code changeToSlave HOST:PORT EPOCH MASTER_ID},
 * {@code setSyncStateSet ID...}. Options: [--all-ack true|false] (allAckInSyncStateSet)
 * [--min-in-sync N] (minInSyncReplicas) [--sync-from-last-file true|false] [--async-learner
 * true|false]. Its status lines add the epoch list, the sync-state-set and the HA client's state.
 */
public final class Harness {
    private static PrintStream out;
    private final DefaultMessageStore store;
    private final MessageStoreConfig config;
    private final String topic;
    private final int queues;
    /** AutoSwitch mode: this broker's id, and the role changeToMaster takes; null in classic mode. */
    private final Long brokerId;
    private final BrokerRole masterRole;
    private Long masterBrokerId;
    private long seq;

    private Harness(DefaultMessageStore store, MessageStoreConfig config, String topic, int queues, Long brokerId,
        BrokerRole masterRole) {
        this.store = store;
        this.config = config;
        this.topic = topic;
        this.queues = queues;
        this.brokerId = brokerId;
        this.masterRole = masterRole;
    }

    public static void main(String[] args) throws Exception {
        // Libraries that log to the console must not mix with the JSON lines.
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err);
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        MessageStoreConfig c = new MessageStoreConfig();
        String root = required(opts, "store");
        BrokerRole role = BrokerRole.valueOf(opts.getOrDefault("role", "ASYNC_MASTER"));
        String mode = opts.getOrDefault("mode", "classic");
        boolean autoSwitch;
        switch (mode) {
            case "classic":
                autoSwitch = false;
                break;
            case "autoswitch":
                autoSwitch = true;
                break;
            default:
                emit(obj("event", "error", "message", "--mode must be classic or autoswitch, not " + mode, "end", true));
                System.exit(2);
                return;
        }
        Long brokerId = null;
        BrokerRole masterRole = null;
        if (autoSwitch) {
            if (!AutoSwitch.SUPPORTED) {
                emit(obj("event", "error", "message",
                    "--mode autoswitch needs RocketMQ 5.x (controller mode); this harness is built for "
                        + Compat.HA_SERVICE, "end", true));
                System.exit(2);
                return;
            }
            if (role == BrokerRole.SLAVE) {
                emit(obj("event", "error", "message",
                    "in --mode autoswitch, --role is the role changeToMaster takes: ASYNC_MASTER or SYNC_MASTER",
                    "end", true));
                System.exit(2);
                return;
            }
            brokerId = Long.parseLong(required(opts, "broker-id"));
            masterRole = role;
            // Until the controller speaks, a controller-mode broker is a slave following nobody.
            role = BrokerRole.SLAVE;
            AutoSwitch.configure(c,
                Boolean.parseBoolean(opts.getOrDefault("all-ack", "false")),
                Integer.parseInt(opts.getOrDefault("min-in-sync", "1")),
                Boolean.parseBoolean(opts.getOrDefault("sync-from-last-file", "false")),
                Boolean.parseBoolean(opts.getOrDefault("async-learner", "false")));
        }
        c.setBrokerRole(role);
        c.setStorePathRootDir(root);
        c.setStorePathCommitLog(root + "/commitlog");
        c.setMappedFileSizeCommitLog(Integer.parseInt(required(opts, "segment")));
        c.setHaListenPort(Integer.parseInt(opts.getOrDefault("ha-port", "0")));
        c.setFlushDiskType(FlushDiskType.ASYNC_FLUSH);
        c.setSlaveTimeout(Integer.parseInt(opts.getOrDefault("slave-timeout", "3000")));
        c.setHaHousekeepingInterval(Integer.parseInt(opts.getOrDefault("housekeeping", "20000")));
        c.setHaSendHeartbeatInterval(Integer.parseInt(opts.getOrDefault("heartbeat", "5000")));
        c.setCheckCRCOnRecover(true);
        c.setFlushIntervalConsumeQueue(100);
        c.setMaxMessageSize(256 * 1024);
        c.setWarmMapedFileEnable(false);
        if (opts.containsKey("cq-file-size")) {
            c.setMappedFileSizeConsumeQueue(Integer.parseInt(opts.get("cq-file-size")));
        }
        if (opts.containsKey("index-slots")) {
            c.setMaxHashSlotNum(Integer.parseInt(opts.get("index-slots")));
        }
        if (opts.containsKey("index-num")) {
            c.setMaxIndexNum(Integer.parseInt(opts.get("index-num")));
        }
        if (opts.containsKey("access-ratio")) {
            c.setAccessMessageInMemoryMaxRatio(Integer.parseInt(opts.get("access-ratio")));
        }
        if (role == BrokerRole.SYNC_MASTER || masterRole == BrokerRole.SYNC_MASTER) {
            Compat.replicas(c, 2, 2);
        }
        boolean abort = new java.io.File(root, "abort").exists();
        DefaultMessageStore store = autoSwitch
            ? Compat.open(c, brokerId, true)
            : Compat.open(c, role == BrokerRole.SLAVE ? 1 : 0, false);
        boolean loaded = store.load();
        if (!loaded) {
            emit(obj("event", "started", "load", false, "end", true));
            System.exit(2);
        }
        store.start();
        if (autoSwitch) {
            AutoSwitch.init(store, brokerId);
        }
        if (opts.containsKey("master")) {
            store.updateHaMasterAddress(opts.get("master"));
        }
        Harness h = new Harness(store, c, opts.getOrDefault("topic", "JavaTopic"),
            Integer.parseInt(opts.getOrDefault("queues", "4")), brokerId, masterRole);
        Map<String, Object> started = h.status("started");
        started.put("load", true);
        started.put("abortFileAtLoad", abort);
        started.put("haService", store.getHaService().getClass().getSimpleName());
        started.put("haPort", c.getHaListenPort());
        started.put("end", true);
        emit(started);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            try {
                if (!h.command(w)) {
                    break;
                }
            } catch (Exception e) {
                emit(obj("event", "error", "command", line, "message", String.valueOf(e), "end", true));
            }
        }
        store.shutdown();
        emit(obj("event", "shutdown", "end", true));
        System.exit(0);
    }

    private boolean command(String[] w) throws Exception {
        switch (w[0]) {
            case "put":
                put(Integer.parseInt(w[1]), Integer.parseInt(w[2]), w.length > 3 ? w[3] : topic);
                emit(obj("event", "put-done", "end", true));
                return true;
            case "status":
                Map<String, Object> s = status("status");
                s.put("end", true);
                emit(s);
                return true;
            case "wait-dispatch":
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (store.dispatchBehindBytes() > 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                Map<String, Object> d = status("dispatched");
                d.put("end", true);
                emit(d);
                return true;
            case "look":
                MessageExt m = store.lookMessageByOffset(Long.parseLong(w[1]));
                Map<String, Object> o = m == null ? obj("event", "message", "found", false) : message(m);
                o.put("end", true);
                emit(o);
                return true;
            case "queue":
                int qid = Integer.parseInt(w[1]);
                String topic = w.length > 2 ? w[2] : this.topic;
                long min = store.getMinOffsetInQueue(topic, qid);
                long max = store.getMaxOffsetInQueue(topic, qid);
                for (long i = min; i < max; i++) {
                    long phy = store.getCommitLogOffsetInQueue(topic, qid, i);
                    MessageExt q = store.lookMessageByOffset(phy);
                    emit(q == null ? obj("event", "message", "found", false, "commitLogOffset", phy) : message(q));
                }
                emit(obj("event", "queue-done", "queueId", qid, "min", min, "max", max, "end", true));
                return true;
            case "master":
                store.updateHaMasterAddress(w[1]);
                emit(obj("event", "master", "address", w[1], "end", true));
                return true;
            case "changeToMaster": {
                requireAutoSwitch(w[0]);
                int epoch = Integer.parseInt(w[1]);
                BrokerRole before = config.getBrokerRole();
                config.setBrokerRole(masterRole);
                boolean ok = AutoSwitch.changeToMaster(store, epoch);
                if (ok) {
                    masterBrokerId = brokerId;
                } else {
                    config.setBrokerRole(before);
                }
                Map<String, Object> r = status("changeToMaster");
                r.put("ok", ok);
                r.put("epoch", epoch);
                r.put("end", true);
                emit(r);
                return true;
            }
            case "changeToSlave": {
                requireAutoSwitch(w[0]);
                String address = w[1];
                int epoch = Integer.parseInt(w[2]);
                long master = Long.parseLong(w[3]);
                BrokerRole before = config.getBrokerRole();
                config.setBrokerRole(BrokerRole.SLAVE);
                // Java's changeToSlave takes this broker's own id (it goes into the handshake);
                // the master's id is what the controller names, kept here for status.
                boolean ok = AutoSwitch.changeToSlave(store, address, epoch, brokerId);
                if (ok) {
                    masterBrokerId = master;
                } else {
                    config.setBrokerRole(before);
                }
                Map<String, Object> r = status("changeToSlave");
                r.put("ok", ok);
                r.put("epoch", epoch);
                r.put("end", true);
                emit(r);
                return true;
            }
            case "setSyncStateSet": {
                requireAutoSwitch(w[0]);
                java.util.Set<Long> ids = new java.util.HashSet<>();
                for (int i = 1; i < w.length; i++) {
                    ids.add(Long.parseLong(w[i]));
                }
                AutoSwitch.setSyncStateSet(store, ids);
                Map<String, Object> r = status("setSyncStateSet");
                r.put("end", true);
                emit(r);
                return true;
            }
            case "getmsg": {
                getMessage(w[1], Integer.parseInt(w[2]), Long.parseLong(w[3]), Integer.parseInt(w[4]), w[5]);
                return true;
            }
            case "search": {
                long at = Compat.searchByTime(store, w[1], Integer.parseInt(w[2]), Long.parseLong(w[3]), w[4]);
                emit(obj("event", "search", "offset", at, "end", true));
                return true;
            }
            case "earliest":
                emit(obj("event", "earliest", "time", store.getEarliestMessageTime(w[1], Integer.parseInt(w[2])),
                    "end", true));
                return true;
            case "storetime":
                emit(obj("event", "storetime", "time",
                    store.getMessageStoreTimeStamp(w[1], Integer.parseInt(w[2]), Long.parseLong(w[3])), "end", true));
                return true;
            case "select": {
                org.apache.rocketmq.store.SelectMappedBufferResult r = store.selectOneMessageByOffset(Long.parseLong(w[1]));
                emit(obj("event", "select", "size", r == null ? -1 : r.getSize(), "end", true));
                if (r != null) {
                    r.release();
                }
                return true;
            }
            case "putkeys": {
                int count = Integer.parseInt(w[1]);
                for (int n = 0; n < count; n++) {
                    long i = seq++;
                    MessageExt msg = Compat.newMessage();
                    msg.setTopic(w[2]);
                    msg.setQueueId((int) (i % queues));
                    msg.setBody(("keyed-" + i).getBytes(StandardCharsets.UTF_8));
                    msg.setKeys("k-" + i + " shared-" + (i % 5));
                    org.apache.rocketmq.common.message.MessageAccessor.putProperty(msg, "UNIQ_KEY", "U-" + i);
                    msg.setBornTimestamp(System.currentTimeMillis());
                    msg.setBornHost(new InetSocketAddress("127.0.0.1", 40000));
                    msg.setStoreHost(new InetSocketAddress("127.0.0.1", 40001));
                    Compat.setPropertiesString(msg, MessageDecoder.messageProperties2String(msg.getProperties()));
                    PutMessageResult r = Compat.put(store, msg);
                    emit(obj("event", "put", "seq", i, "status", r.getPutMessageStatus().name(),
                        "offset", r.getAppendMessageResult().getWroteOffset()));
                }
                emit(obj("event", "putkeys-done", "end", true));
                return true;
            }
            case "querymsg": {
                org.apache.rocketmq.store.QueryMessageResult r = store.queryMessage(w[1], w[2], Integer.parseInt(w[3]),
                    Long.parseLong(w[4]), Long.parseLong(w[5]));
                java.util.List<Object> offsets = new java.util.ArrayList<>();
                for (java.nio.ByteBuffer b : r.getMessageBufferList()) {
                    offsets.add(b.getLong(b.position() + 28));
                }
                emit(obj("event", "querymsg", "physicalOffsets", offsets,
                    "indexLastUpdateTimestamp", r.getIndexLastUpdateTimestamp(),
                    "indexLastUpdatePhyoffset", r.getIndexLastUpdatePhyoffset(), "end", true));
                r.release();
                return true;
            }
            case "shutdown":
                return false;
            default:
                emit(obj("event", "error", "message", "unknown command " + w[0], "end", true));
                return true;
        }
    }

    /**
     * Puts COUNT messages of SIZE body bytes, each with two keys and two properties; most have
     * tags, some an IPv6 born or store host, some are prepared transactional messages, and the
     * flag varies.
     */
    private void put(int count, int size, String topic) throws Exception {
        InetSocketAddress born = new InetSocketAddress("127.0.0.1", 40000);
        InetSocketAddress born6 = new InetSocketAddress("::1", 40001);
        InetSocketAddress storeHost = new InetSocketAddress("127.0.0.1", config.getHaListenPort() - 1);
        InetSocketAddress storeHost6 = new InetSocketAddress("::1", config.getHaListenPort() - 1);
        for (int n = 0; n < count; n++) {
            long i = seq++;
            byte[] prefix = String.format("java-%08d-", i).getBytes(StandardCharsets.US_ASCII);
            byte[] body = new byte[Math.max(size, prefix.length)];
            java.util.Arrays.fill(body, (byte) ('a' + i % 26));
            System.arraycopy(prefix, 0, body, 0, prefix.length);
            MessageExt msg = Compat.newMessage();
            msg.setTopic(topic);
            msg.setQueueId((int) (i % queues));
            msg.setBody(body);
            if (i % 13 != 12) {
                msg.setTags("Tag" + (i % 3));
            }
            msg.setFlag((int) (i % 11));
            // Some prepared transactional messages: stored, but not in any consume queue.
            boolean prepared = i % 17 == 16;
            if (prepared) {
                msg.setSysFlag(MessageSysFlag.TRANSACTION_PREPARED_TYPE);
            }
            msg.setKeys("key-" + i + " alt-" + i);
            msg.putUserProperty("seq", Long.toString(i));
            msg.putUserProperty("note", "h\u00e9llo " + i);
            msg.setBornTimestamp(System.currentTimeMillis());
            msg.setBornHost(i % 5 == 4 ? born6 : born);
            msg.setStoreHost(i % 7 == 6 ? storeHost6 : storeHost);
            Compat.setPropertiesString(msg, MessageDecoder.messageProperties2String(msg.getProperties()));
            PutMessageResult r = Compat.put(store, msg);
            Map<String, Object> o = obj("event", "put", "seq", i, "status", r.getPutMessageStatus().name(),
                "prepared", prepared);
            AppendMessageResult a = r.getAppendMessageResult();
            if (a != null) {
                o.put("offset", a.getWroteOffset());
                o.put("size", a.getWroteBytes());
                o.put("msgId", a.getMsgId());
                o.put("queueOffset", a.getLogicsOffset());
            }
            o.put("queueId", msg.getQueueId());
            emit(o);
        }
    }

    /** getMessage with a TAG filter as ExpressionMessageFilter applies it to the consume queue. */
    private void getMessage(String topic, int queueId, long offset, int max, String expr) {
        java.util.Set<Integer> codes = new java.util.HashSet<>();
        boolean all = expr.equals("*");
        for (String tag : expr.split("\\|\\|")) {
            if (!tag.trim().isEmpty()) {
                codes.add(tag.trim().hashCode());
            }
        }
        org.apache.rocketmq.store.MessageFilter filter = new org.apache.rocketmq.store.MessageFilter() {
            @Override
            public boolean isMatchedByConsumeQueue(Long tagsCode, org.apache.rocketmq.store.ConsumeQueueExt.CqExtUnit ext) {
                return all || tagsCode == null || codes.contains(tagsCode.intValue());
            }

            @Override
            public boolean isMatchedByCommitLog(java.nio.ByteBuffer msgBuffer, Map<String, String> properties) {
                return true;
            }
        };
        org.apache.rocketmq.store.GetMessageResult r = store.getMessage("interop", topic, queueId, offset, max, filter);
        java.util.List<Object> queueOffsets = new java.util.ArrayList<>();
        java.util.List<Object> physicalOffsets = new java.util.ArrayList<>();
        for (java.nio.ByteBuffer b : r.getMessageBufferList()) {
            queueOffsets.add(b.getLong(b.position() + 20));
            physicalOffsets.add(b.getLong(b.position() + 28));
        }
        emit(obj("event", "getmsg", "status", r.getStatus().name(), "nextBeginOffset", r.getNextBeginOffset(),
            "minOffset", r.getMinOffset(), "maxOffset", r.getMaxOffset(), "bufferTotalSize", r.getBufferTotalSize(),
            "suggestPullingFromSlave", r.isSuggestPullingFromSlave(), "queueOffsets", queueOffsets,
            "physicalOffsets", physicalOffsets, "end", true));
        r.release();
    }

    private void requireAutoSwitch(String command) {
        if (brokerId == null) {
            throw new IllegalStateException(command + " needs --mode autoswitch");
        }
    }

    private Map<String, Object> status(String event) {
        Map<String, Object> s = obj("event", event,
            "maxPhyOffset", store.getMaxPhyOffset(),
            "minPhyOffset", store.getMinPhyOffset(),
            "confirmOffset", store.getConfirmOffset(),
            "dispatchBehind", store.dispatchBehindBytes(),
            "haConnections", store.getHaService().getConnectionCount().get());
        if (brokerId != null) {
            s.put("mode", "autoswitch");
            s.put("brokerId", brokerId);
            s.put("role", config.getBrokerRole().name());
            s.put("masterBrokerId", masterBrokerId);
            AutoSwitch.status(store, s);
        }
        return s;
    }

    private static Map<String, Object> message(MessageExt m) {
        Map<String, Object> props = new TreeMap<>(m.getProperties());
        return obj("event", "message", "found", true,
            "topic", m.getTopic(),
            "queueId", m.getQueueId(),
            "queueOffset", m.getQueueOffset(),
            "commitLogOffset", m.getCommitLogOffset(),
            "storeSize", m.getStoreSize(),
            "msgId", m.getMsgId(),
            "bodyCRC", m.getBodyCRC(),
            "flag", m.getFlag(),
            "bornHost", m.getBornHost().toString(),
            "storeHost", m.getStoreHost().toString(),
            "sysFlag", m.getSysFlag(),
            "bornTimestamp", m.getBornTimestamp(),
            "storeTimestamp", m.getStoreTimestamp(),
            "tags", m.getTags(),
            "keys", m.getKeys(),
            "properties", props,
            "body", Base64.getEncoder().encodeToString(m.getBody()));
    }

    private static String required(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return v;
    }

    private static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new java.util.LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    private static synchronized void emit(Map<String, Object> o) {
        StringBuilder b = new StringBuilder();
        json(b, o);
        out.println(b);
    }

    @SuppressWarnings("unchecked")
    private static void json(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Map) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                json(b, e.getKey());
                b.append(':');
                json(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof List) {
            b.append('[');
            List<Object> l = (List<Object>) v;
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    b.append(',');
                }
                json(b, l.get(i));
            }
            b.append(']');
        } else if (v instanceof Number || v instanceof Boolean) {
            b.append(v);
        } else {
            b.append('"');
            for (char ch : v.toString().toCharArray()) {
                switch (ch) {
                    case '"': b.append("\\\""); break;
                    case '\\': b.append("\\\\"); break;
                    case '\n': b.append("\\n"); break;
                    case '\r': b.append("\\r"); break;
                    case '\t': b.append("\\t"); break;
                    default:
                        if (ch < 0x20) {
                            b.append(String.format("\\u%04x", (int) ch));
                        } else {
                            b.append(ch);
                        }
                }
            }
            b.append('"');
        }
    }
}
