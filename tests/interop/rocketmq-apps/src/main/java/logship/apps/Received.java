package logship.apps;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Map;
import java.util.TreeMap;

import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

/** The {@code msg} line every consumer prints for a message it received. */
final class Received {
    private Received() {}

    static Map<String, Object> line(MessageExt m, String answer) {
        Map<String, String> user = new TreeMap<>();
        for (Map.Entry<String, String> e : m.getProperties().entrySet()) {
            if (!MessageConst.STRING_HASH_SET.contains(e.getKey())) {
                user.put(e.getKey(), e.getValue());
            }
        }
        Map<String, Object> out = Json.obj("event", "msg", "msgId", m.getMsgId(),
            "offsetMsgId", offsetMsgId(m), "topic", m.getTopic(),
            "realTopic", m.getProperty(MessageConst.PROPERTY_RETRY_TOPIC),
            "broker", m.getBrokerName(), "storeHost", host(m.getStoreHost()),
            "queue", m.getQueueId(), "queueOffset", m.getQueueOffset(), "commitLogOffset", m.getCommitLogOffset(),
            "keys", m.getKeys(), "tags", m.getTags(), "reconsumeTimes", m.getReconsumeTimes(),
            "bodyLen", m.getBody() == null ? 0 : m.getBody().length,
            "bodyCrc", m.getBody() == null ? null : Apps.crc(m.getBody()),
            "bornTimestamp", m.getBornTimestamp(), "storeTimestamp", m.getStoreTimestamp(),
            "props", user, "atMs", System.currentTimeMillis());
        if (answer != null) {
            out.put("answer", answer);
        }
        return out;
    }

    /** The offset message id (the broker's id), where the client keeps it. */
    static String offsetMsgId(MessageExt m) {
        Object id = Apps.call(m, "getOffsetMsgId");
        return id == null ? null : id.toString();
    }

    static String host(SocketAddress a) {
        if (a instanceof InetSocketAddress) {
            InetSocketAddress i = (InetSocketAddress) a;
            return i.getAddress().getHostAddress() + ":" + i.getPort();
        }
        return String.valueOf(a);
    }
}
