// Command goclient is a RocketMQ application on the Go client (rocketmq-client-go/v2), for
// logship's tests: a producer and a push consumer that print one JSON object per line on stdout,
// the same lines as the Java programs in tests/interop/rocketmq-apps.
//
//	goclient produce --namesrv ADDR --topic T [--group G] [--instance I]
//	         [--mode sync|async|oneway|batch[,...]] [--count N] [--size BYTES] [--batch-size B]
//	         [--tags A,B] [--keys PREFIX] [--props k=v,k=v] [--duration-ms D] [--until-stopped]
//	         [--retries N] [--timeout-ms MS] [--quiet] [--access-key AK --secret-key SK]
//	goclient consume --namesrv ADDR --topic T --group G [--instance I] [--sub EXPR] [--orderly]
//	         [--from first|last] [--count N] [--duration-ms D] [--linger-ms MS]
//	         [--later-keys k1,k2] [--later-all] [--later-times K] [--max-reconsume R] [--quiet]
//
// Several modes run one after another, message numbers going on (mode k sends --count messages
// from k * count). Message i has the body "{instance}-{i:08}-aaaa..." of size bytes, tag tags[i % n], keys
// "{keys}-{i}" and the user properties seq=i, producer=instance. Both modes stop on stdin EOF or
// SIGTERM too. The client's own logging goes to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// version is the rocketmq-client-go version in go.mod, printed on the ready line.
const version = "v2.1.3-0.20251226070945-2173d070fd1b"

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

// emit prints one JSON object: the event name, then the key/value pairs.
func emit(event string, kv ...interface{}) {
	m := map[string]interface{}{"event": event}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	line(m)
}

func line(m map[string]interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(m)
}

// errorFields names an error: its Go type, message and, for a broker error, the response code.
func errorFields(err error) map[string]interface{} {
	m := map[string]interface{}{"class": fmt.Sprintf("%T", err), "message": err.Error()}
	var broker primitive.MQBrokerErr
	var brokerPtr *primitive.MQBrokerErr
	switch {
	case errors.As(err, &broker):
		m["responseCode"] = int(broker.ResponseCode)
	case errors.As(err, &brokerPtr):
		m["responseCode"] = int(brokerPtr.ResponseCode)
	default:
		// MQClientErr keeps its code private: read it from "CODE: n  DESC: ...".
		if s := err.Error(); strings.HasPrefix(s, "CODE: ") {
			if f := strings.Fields(s); len(f) > 1 {
				if code, e := strconv.Atoi(f[1]); e == nil {
					m["responseCode"] = code
				}
			}
		}
	}
	return m
}

func fatal(err error) {
	m := errorFields(err)
	m["event"] = "fatal"
	m["program"] = "goclient"
	line(m)
	os.Exit(2)
}

// stopped is closed on stdin EOF or SIGTERM/SIGINT.
var stopped = make(chan struct{})

func watchStop() {
	var once sync.Once
	stop := func() { once.Do(func() { close(stopped) }) }
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		stop()
	}()
}

func isStopped() bool {
	select {
	case <-stopped:
		return true
	default:
		return false
	}
}

func body(who string, i int64, size int) []byte {
	head := []byte(fmt.Sprintf("%s-%08d-", who, i))
	n := size
	if n < len(head) {
		n = len(head)
	}
	b := make([]byte, n)
	copy(b, head)
	for k := len(head); k < n; k++ {
		b[k] = byte('a' + i%26)
	}
	return b
}

func crc(b []byte) string {
	return fmt.Sprintf("%08x", crc32.ChecksumIEEE(b))
}

func credentials(ak, sk string) *primitive.Credentials {
	if ak == "" && sk == "" {
		return nil
	}
	if ak == "" || sk == "" {
		fatal(errors.New("--access-key and --secret-key go together"))
	}
	return &primitive.Credentials{AccessKey: ak, SecretKey: sk}
}

// Java's SendStatus names, by the Go client's SendStatus order.
var statusNames = map[primitive.SendStatus]string{
	primitive.SendOK:                "SEND_OK",
	primitive.SendFlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
	primitive.SendUnknownError:      "UNKNOWN_ERROR",
}

func main() {
	// Everything but the JSON lines goes to stderr.
	rlog.SetLogLevel(envOr("ROCKETMQ_GO_LOG_LEVEL", "warn"))
	if len(os.Args) < 2 {
		fatal(errors.New("usage: goclient produce|consume --namesrv ADDR ..."))
	}
	switch os.Args[1] {
	case "produce":
		produce(os.Args[2:])
	case "consume":
		consume(os.Args[2:])
	default:
		fatal(fmt.Errorf("unknown mode %q: produce or consume", os.Args[1]))
	}
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

type stats struct {
	mu        sync.Mutex
	messages  int64
	sends     int64
	errors    int64
	statuses  map[string]int64
	errs      map[string]int64
	brokers   map[string]int64
	latencies []int64
}

func (s *stats) ok(quiet bool, mode string, i int64, n int, r *primitive.SendResult, t0 time.Time) {
	us := time.Since(t0).Microseconds()
	status := statusNames[r.Status]
	broker, topic, queue := "", "", -1
	if r.MessageQueue != nil {
		broker, topic, queue = r.MessageQueue.BrokerName, r.MessageQueue.Topic, r.MessageQueue.QueueId
	}
	s.mu.Lock()
	s.sends++
	s.messages += int64(n)
	s.statuses[status] += int64(n)
	s.brokers[broker] += int64(n)
	s.latencies = append(s.latencies, us)
	s.mu.Unlock()
	if quiet {
		return
	}
	m := map[string]interface{}{"event": "send", "mode": mode, "i": i, "n": n, "status": status,
		"msgId": r.MsgID, "offsetMsgId": r.OffsetMsgID, "topic": topic, "broker": broker,
		"queue": queue, "queueOffset": r.QueueOffset, "latencyUs": us, "atMs": time.Now().UnixMilli()}
	if n > 1 {
		m["msgIds"] = strings.Split(r.MsgID, ",")
		m["offsetMsgIds"] = strings.Split(r.OffsetMsgID, ",")
	}
	line(m)
}

func (s *stats) oneway(quiet bool, i int64, t0 time.Time) {
	us := time.Since(t0).Microseconds()
	s.mu.Lock()
	s.sends++
	s.messages++
	s.statuses["ONEWAY"]++
	s.latencies = append(s.latencies, us)
	s.mu.Unlock()
	if !quiet {
		emit("oneway", "i", i, "latencyUs", us)
	}
}

func (s *stats) fail(i int64, err error, t0 time.Time) {
	s.mu.Lock()
	s.errors++
	s.errs[fmt.Sprintf("%T", err)]++
	s.mu.Unlock()
	m := errorFields(err)
	m["event"] = "send_error"
	m["i"] = i
	m["latencyUs"] = time.Since(t0).Microseconds()
	m["atMs"] = time.Now().UnixMilli()
	line(m)
}

func pct(sorted []int64, p float64) interface{} {
	if len(sorted) == 0 {
		return nil
	}
	idx := int(float64(len(sorted))*p/100.0+0.999999) - 1
	if idx < 0 {
		idx = 0
	}
	if idx >= len(sorted) {
		idx = len(sorted) - 1
	}
	return sorted[idx]
}

// sendOne sends message first (or the batch first..first+n) in mode m.
func sendOne(ctx context.Context, p rocketmq.Producer, m string, first, n int64,
	message func(int64) *primitive.Message, st *stats, quiet bool, sem chan struct{}, inFlight *sync.WaitGroup) {
	t0 := time.Now()
	switch m {
	case "sync":
		r, err := p.SendSync(ctx, message(first))
		if err != nil {
			st.fail(first, err, t0)
		} else {
			st.ok(quiet, m, first, 1, r, t0)
		}
	case "batch":
		msgs := make([]*primitive.Message, 0, n)
		for i := first; i < first+n; i++ {
			msgs = append(msgs, message(i))
		}
		r, err := p.SendSync(ctx, msgs...)
		if err != nil {
			st.fail(first, err, t0)
		} else {
			st.ok(quiet, m, first, int(n), r, t0)
		}
	case "oneway":
		if err := p.SendOneWay(ctx, message(first)); err != nil {
			st.fail(first, err, t0)
		} else {
			st.oneway(quiet, first, t0)
		}
	case "async":
		sem <- struct{}{}
		inFlight.Add(1)
		err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
			if err != nil {
				st.fail(first, err, t0)
			} else {
				st.ok(quiet, m, first, 1, r, t0)
			}
			<-sem
			inFlight.Done()
		}, message(first))
		if err != nil {
			st.fail(first, err, t0)
			<-sem
			inFlight.Done()
		}
	}
}

func produce(argv []string) {
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	namesrv := fs.String("namesrv", "", "NameServer address(es), ';'-separated")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "logship_apps_producer", "producer group")
	instance := fs.String("instance", fmt.Sprintf("goproducer-%d", os.Getpid()), "instance name")
	mode := fs.String("mode", "sync", "sync, async, oneway or batch")
	count := fs.Int64("count", 100, "messages to send")
	size := fs.Int("size", 128, "body size")
	batch := fs.Int("batch-size", 10, "messages per batch")
	tags := fs.String("tags", "TagA", "tags, cycled")
	keys := fs.String("keys", "key", "key prefix")
	props := fs.String("props", "", "extra user properties k=v,k=v")
	durationMs := fs.Int64("duration-ms", 0, "send for this long instead of --count")
	untilStopped := fs.Bool("until-stopped", false, "send until stdin EOF or SIGTERM")
	retries := fs.Int("retries", 2, "retries")
	timeoutMs := fs.Int("timeout-ms", 3000, "send timeout")
	maxInFlight := fs.Int("max-in-flight", 64, "async sends in flight")
	quiet := fs.Bool("quiet", false, "no line per send")
	ak := fs.String("access-key", "", "ACL access key")
	sk := fs.String("secret-key", "", "ACL secret key")
	if err := fs.Parse(argv); err != nil {
		fatal(err)
	}
	if *namesrv == "" || *topic == "" {
		fatal(errors.New("--namesrv and --topic are required"))
	}
	modes := strings.Split(*mode, ",")
	for _, m := range modes {
		if m != "sync" && m != "async" && m != "oneway" && m != "batch" {
			fatal(errors.New("--mode is sync, async, oneway or batch, or a list of them"))
		}
	}
	tagList := strings.Split(*tags, ",")
	extra := map[string]string{}
	if *props != "" {
		for _, kv := range strings.Split(*props, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				fatal(fmt.Errorf("--props wants k=v,k=v, got %q", kv))
			}
			extra[k] = v
		}
	}
	opts := []producer.Option{
		producer.WithNsResolver(primitive.NewPassthroughResolver(strings.Split(*namesrv, ";"))),
		producer.WithGroupName(*group),
		producer.WithInstanceName(*instance),
		producer.WithRetry(*retries),
		producer.WithSendMsgTimeout(time.Duration(*timeoutMs) * time.Millisecond),
	}
	if c := credentials(*ak, *sk); c != nil {
		opts = append(opts, producer.WithCredentials(*c))
	}
	p, err := rocketmq.NewProducer(opts...)
	if err != nil {
		fatal(err)
	}
	watchStop()
	if err := p.Start(); err != nil {
		fatal(err)
	}
	emit("ready", "program", "goclient-produce", "version", version, "instance", *instance, "mode", *mode)

	message := func(i int64) *primitive.Message {
		m := primitive.NewMessage(*topic, body(*instance, i, *size))
		m.WithTag(tagList[i%int64(len(tagList))])
		m.WithKeys([]string{fmt.Sprintf("%s-%d", *keys, i)})
		m.WithProperty("seq", strconv.FormatInt(i, 10))
		m.WithProperty("producer", *instance)
		for k, v := range extra {
			m.WithProperty(k, v)
		}
		return m
	}
	st := &stats{statuses: map[string]int64{}, errs: map[string]int64{}, brokers: map[string]int64{}}
	unbounded := *durationMs > 0 || *untilStopped
	var deadline time.Time
	if *durationMs > 0 {
		deadline = time.Now().Add(time.Duration(*durationMs) * time.Millisecond)
	}
	var inFlight sync.WaitGroup
	sem := make(chan struct{}, *maxInFlight)
	start := time.Now()
	ctx := context.Background()
	if unbounded && len(modes) > 1 {
		fatal(errors.New("--duration-ms and --until-stopped take one --mode"))
	}
	// One mode after another; message numbers go on: mode k sends count messages from k * count.
	for k, m := range modes {
		base := int64(k) * *count
		step := int64(1)
		if m == "batch" {
			step = int64(*batch)
		}
		for first := base; !isStopped(); first += step {
			if !deadline.IsZero() && time.Now().After(deadline) {
				break
			}
			if !unbounded && first >= base+*count {
				break
			}
			n := step
			if !unbounded && base+*count-first < n {
				n = base + *count - first
			}
			sendOne(ctx, p, m, first, n, message, st, *quiet, sem, &inFlight)
		}
		inFlight.Wait()
	}
	inFlight.Wait()
	elapsed := time.Since(start).Milliseconds()
	_ = p.Shutdown()
	st.mu.Lock()
	defer st.mu.Unlock()
	sort.Slice(st.latencies, func(a, b int) bool { return st.latencies[a] < st.latencies[b] })
	var max interface{}
	if len(st.latencies) > 0 {
		max = st.latencies[len(st.latencies)-1]
	}
	emit("summary", "program", "goclient-produce", "messages", st.messages, "sends", st.sends,
		"errors", st.errors, "statuses", st.statuses, "errorClasses", st.errs, "brokers", st.brokers,
		"elapsedMs", elapsed, "p50Us", pct(st.latencies, 50), "p90Us", pct(st.latencies, 90),
		"p99Us", pct(st.latencies, 99), "maxUs", max)
}

// User properties: everything but the client's own keys.
var systemProps = map[string]bool{
	primitive.PropertyKeys: true, primitive.PropertyTags: true, primitive.PropertyUniqueClientMessageIdKeyIndex: true,
	primitive.PropertyWaitStoreMsgOk: true, primitive.PropertyMinOffset: true, primitive.PropertyMaxOffset: true,
	primitive.PropertyConsumeStartTime: true, primitive.PropertyRetryTopic: true, primitive.PropertyReconsumeTime: true,
	primitive.PropertyMaxReconsumeTimes: true, primitive.PropertyOriginMessageId: true, primitive.PropertyRealTopic: true,
	primitive.PropertyRealQueueId: true, primitive.PropertyTransactionPrepared: true, primitive.PropertyProducerGroup: true,
	"CLUSTER": true, "TRACE_ON": true, "MSG_REGION": true,
}

func consume(argv []string) {
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	namesrv := fs.String("namesrv", "", "NameServer address(es), ';'-separated")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	instance := fs.String("instance", fmt.Sprintf("goconsumer-%d", os.Getpid()), "instance name")
	sub := fs.String("sub", "*", "tag expression")
	orderly := fs.Bool("orderly", false, "orderly consumption")
	from := fs.String("from", "first", "first or last")
	count := fs.Int64("count", 0, "stop after this many distinct messages consumed")
	durationMs := fs.Int64("duration-ms", 0, "stop after this long")
	lingerMs := fs.Int64("linger-ms", 0, "after --count, wait this long for duplicates")
	laterKeys := fs.String("later-keys", "", "answer RECONSUME_LATER for these keys")
	laterAll := fs.Bool("later-all", false, "answer RECONSUME_LATER for every message")
	laterTimes := fs.Int("later-times", 1<<30, "... while reconsumeTimes is below this")
	maxReconsume := fs.Int("max-reconsume", -1, "maxReconsumeTimes")
	quiet := fs.Bool("quiet", false, "no line per message")
	ak := fs.String("access-key", "", "ACL access key")
	sk := fs.String("secret-key", "", "ACL secret key")
	if err := fs.Parse(argv); err != nil {
		fatal(err)
	}
	if *namesrv == "" || *topic == "" || *group == "" {
		fatal(errors.New("--namesrv, --topic and --group are required"))
	}
	later := map[string]bool{}
	if *laterKeys != "" {
		for _, k := range strings.Split(*laterKeys, ",") {
			later[k] = true
		}
	}
	where := consumer.ConsumeFromFirstOffset
	switch *from {
	case "first":
	case "last":
		where = consumer.ConsumeFromLastOffset
	default:
		fatal(errors.New("--from is first or last"))
	}
	// The allocation, printed once per change as a "rebalance" line (as the Java PushConsume
	// does), so that a test can wait for a group to settle.
	var lastMu sync.Mutex
	last := map[string]string{}
	strategy := func(g, cid string, all []*primitive.MessageQueue, cids []string) []*primitive.MessageQueue {
		mine := consumer.AllocateByAveragely(g, cid, all, cids)
		topicName := ""
		if len(all) > 0 {
			topicName = all[0].Topic
		}
		queues := make([]map[string]interface{}, 0, len(mine))
		for _, q := range mine {
			queues = append(queues, map[string]interface{}{"broker": q.BrokerName, "queue": q.QueueId})
		}
		key := fmt.Sprint(len(cids), queues)
		lastMu.Lock()
		changed := last[topicName] != key
		last[topicName] = key
		lastMu.Unlock()
		if changed {
			emit("rebalance", "topic", topicName, "consumers", len(cids), "allQueues", len(all), "queues", queues)
		}
		return mine
	}
	opts := []consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver(strings.Split(*namesrv, ";"))),
		consumer.WithGroupName(*group),
		consumer.WithStrategy(strategy),
		consumer.WithInstance(*instance),
		consumer.WithConsumeFromWhere(where),
		consumer.WithConsumerOrder(*orderly),
	}
	if *maxReconsume >= 0 {
		opts = append(opts, consumer.WithMaxReconsumeTimes(int32(*maxReconsume)))
	}
	if c := credentials(*ak, *sk); c != nil {
		opts = append(opts, consumer.WithCredentials(*c))
	}
	c, err := rocketmq.NewPushConsumer(opts...)
	if err != nil {
		fatal(err)
	}
	var received, laterCount, duplicates int64
	var doneMu sync.Mutex
	done := map[string]bool{}
	perBroker := map[string]int64{}
	enough := make(chan struct{})
	var enoughOnce sync.Once
	err = c.Subscribe(*topic, consumer.MessageSelector{Type: consumer.TAG, Expression: *sub},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				atomic.AddInt64(&received, 1)
				broker := ""
				queue := -1
				if m.Queue != nil {
					broker, queue = m.Queue.BrokerName, m.Queue.QueueId
				}
				retry := (*laterAll || later[m.GetKeys()]) && int(m.ReconsumeTimes) < *laterTimes
				doneMu.Lock()
				perBroker[broker]++
				if retry {
					laterCount++
				} else if done[m.MsgId] {
					duplicates++
				} else {
					done[m.MsgId] = true
				}
				consumed := int64(len(done))
				doneMu.Unlock()
				answer := "SUCCESS"
				if retry {
					answer = "RECONSUME_LATER"
					if *orderly {
						answer = "SUSPEND"
					}
				}
				if !*quiet {
					user := map[string]string{}
					for k, v := range m.GetProperties() {
						if !systemProps[k] {
							user[k] = v
						}
					}
					line(map[string]interface{}{"event": "msg", "msgId": m.MsgId, "offsetMsgId": m.OffsetMsgId,
						"topic": m.Topic, "realTopic": m.GetProperty(primitive.PropertyRetryTopic),
						"broker": broker, "storeHost": m.StoreHost, "queue": queue, "queueOffset": m.QueueOffset,
						"commitLogOffset": m.CommitLogOffset, "keys": m.GetKeys(), "tags": m.GetTags(),
						"reconsumeTimes": m.ReconsumeTimes, "bodyLen": len(m.Body), "bodyCrc": crc(m.Body),
						"bornTimestamp": m.BornTimestamp, "storeTimestamp": m.StoreTimestamp, "props": user,
						"atMs": time.Now().UnixMilli(), "answer": answer})
				}
				if *count > 0 && consumed >= *count {
					enoughOnce.Do(func() { close(enough) })
				}
				if retry {
					if *orderly {
						result = consumer.SuspendCurrentQueueAMoment
					} else {
						result = consumer.ConsumeRetryLater
					}
				}
			}
			return result, nil
		})
	if err != nil {
		fatal(err)
	}
	watchStop()
	if err := c.Start(); err != nil {
		fatal(err)
	}
	emit("ready", "program", "goclient-consume", "version", version, "instance", *instance, "group", *group,
		"orderly", *orderly)
	start := time.Now()
	var timeout <-chan time.Time
	if *durationMs > 0 {
		timeout = time.After(time.Duration(*durationMs) * time.Millisecond)
	}
	select {
	case <-enough:
		if *lingerMs > 0 {
			select {
			case <-time.After(time.Duration(*lingerMs) * time.Millisecond):
			case <-stopped:
			}
		}
	case <-timeout:
	case <-stopped:
	}
	// Persists the offsets to the broker and unregisters the client.
	_ = c.Shutdown()
	doneMu.Lock()
	defer doneMu.Unlock()
	emit("summary", "program", "goclient-consume", "received", atomic.LoadInt64(&received),
		"consumed", int64(len(done)), "duplicates", duplicates, "later", laterCount, "brokers", perBroker,
		"elapsedMs", time.Since(start).Milliseconds(), "final", true)
}
