package logship.apps;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/** What differs on the 4.9.x line. */
final class Compat {
    /** The RocketMQ release these programs were built against. */
    static final String VERSION = "4.9.7";

    private Compat() {}

    /** Broadcasting instead of clustering ({@code MessageModel} lives in org.apache.rocketmq.common.protocol.heartbeat). */
    static void broadcasting(DefaultMQPushConsumer consumer) {
        consumer.setMessageModel(MessageModel.BROADCASTING);
    }
}
