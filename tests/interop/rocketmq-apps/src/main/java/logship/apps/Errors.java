package logship.apps;

import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;

/** RocketMQ's response codes out of client exceptions. */
final class Errors {
    private Errors() {}

    static Integer responseCode(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof MQBrokerException) {
                return ((MQBrokerException) t).getResponseCode();
            }
            if (t instanceof MQClientException && ((MQClientException) t).getResponseCode() != -1) {
                return ((MQClientException) t).getResponseCode();
            }
        }
        return null;
    }
}
