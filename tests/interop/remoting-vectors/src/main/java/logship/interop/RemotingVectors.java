package logship.interop;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.serializer.SerializerFeature;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.annotation.CFNotNull;
import org.apache.rocketmq.remoting.netty.NettyDecoder;
import org.apache.rocketmq.remoting.netty.NettyEncoder;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.SerializeType;

/**
 * Builds and decodes RocketMQ remoting frames with Apache RocketMQ's own classes, for logship's
 * codec tests (remoting/tests/java_vectors.rs). Written once for both client lines: classes that
 * moved between 4.9.x (org.apache.rocketmq.common.protocol) and 5.x
 * (org.apache.rocketmq.remoting.protocol) are found by their name below either package.
 *
 * <pre>
 *   dump   SPEC OUT_DIR   codes.json (RequestCode, ResponseCode, LanguageCode) and headers.json
 *                         (the fields of every header class the spec names) into OUT_DIR
 *   encode SPEC OUT_DIR   every vector of the spec for this line, as NAME.json.bin / NAME.rocketmq.bin
 *   decode MANIFEST       decodes each file the manifest names; one JSON document on stdout
 * </pre>
 *
 * Frames go through RocketMQ's NettyEncoder and NettyDecoder (in an EmbeddedChannel), exactly as
 * a broker or client would write and read them.
 */
public final class RemotingVectors {
    private static final String[] PACKAGES = {
        "org.apache.rocketmq.remoting.protocol.",
        "org.apache.rocketmq.common.protocol.",
        "org.apache.rocketmq.common.",
        "org.apache.rocketmq.remoting.",
    };

    private RemotingVectors() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: dump SPEC OUT_DIR | encode SPEC OUT_DIR | decode MANIFEST");
            System.exit(2);
        }
        switch (args[0]) {
            case "dump" -> dump(read(args[1]), Path.of(args[2]));
            case "encode" -> encode(read(args[1]), Path.of(args[2]));
            case "decode" -> System.out.println(JSON.toJSONString(decode(JSON.parseArray(Files.readString(Path.of(args[1])))), SerializerFeature.WriteMapNullValue));
            default -> {
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
            }
        }
    }

    private static JSONObject read(String path) throws Exception {
        return JSON.parseObject(Files.readString(Path.of(path)));
    }

    /** "4" on rocketmq-client 4.x, "5" on 5.x. */
    private static String line() {
        try {
            Class.forName("org.apache.rocketmq.remoting.protocol.RequestCode");
            return "5";
        } catch (ClassNotFoundException e) {
            return "4";
        }
    }

    static Class<?> cls(String name) {
        for (String p : PACKAGES) {
            try {
                return Class.forName(p + name);
            } catch (ClassNotFoundException e) {
                // next package
            }
        }
        throw new IllegalArgumentException("no class " + name + " on rocketmq " + line());
    }

    private static boolean onThisLine(JSONObject v) {
        JSONArray lines = v.getJSONArray("lines");
        return lines == null || lines.contains(line()) || lines.contains(Integer.parseInt(line()));
    }

    // ---- dump ---------------------------------------------------------------------------

    private static void dump(JSONObject spec, Path out) throws Exception {
        Files.createDirectories(out);
        JSONObject codes = new JSONObject(new TreeMap<>());
        codes.put("requestCode", intConstants(cls("RequestCode")));
        codes.put("responseCode", intConstants(cls("ResponseCode")));
        Map<String, Object> languages = new TreeMap<>();
        for (LanguageCode c : LanguageCode.values()) {
            languages.put(c.name(), (int) c.getCode());
        }
        codes.put("languageCode", languages);
        Map<String, Object> serializeTypes = new TreeMap<>();
        for (SerializeType t : SerializeType.values()) {
            serializeTypes.put(t.name(), (int) t.getCode());
        }
        codes.put("serializeType", serializeTypes);
        // MQVersion.Version ordinals: what RemotingCommand.version carries.
        Class<?> mqVersion = cls("MQVersion");
        Map<String, Object> versions = new TreeMap<>();
        versions.put("CURRENT_VERSION", mqVersion.getField("CURRENT_VERSION").getInt(null));
        Class<?> version = Class.forName(mqVersion.getName() + "$Version");
        for (Object name : spec.getJSONArray("mqVersions")) {
            for (Object constant : version.getEnumConstants()) {
                if (((Enum<?>) constant).name().equals(name)) {
                    versions.put((String) name, ((Enum<?>) constant).ordinal());
                }
            }
        }
        codes.put("mqVersion", versions);
        Files.writeString(out.resolve("codes.json"), JSON.toJSONString(codes, SerializerFeature.PrettyFormat, SerializerFeature.MapSortField) + "\n");

        Map<String, Object> headers = new TreeMap<>();
        for (Object name : spec.getJSONArray("headerClasses")) {
            Class<?> c = cls((String) name);
            List<Object> fields = new ArrayList<>();
            for (Field f : fields(c)) {
                Map<String, Object> d = new TreeMap<>();
                d.put("name", f.getName());
                d.put("type", f.getType().getSimpleName());
                d.put("required", f.getAnnotation(CFNotNull.class) != null);
                fields.add(d);
            }
            fields.sort((a, b) -> ((String) ((Map<?, ?>) a).get("name")).compareTo((String) ((Map<?, ?>) b).get("name")));
            headers.put(c.getSimpleName(), fields);
        }
        Files.writeString(out.resolve("headers.json"), JSON.toJSONString(headers, SerializerFeature.PrettyFormat, SerializerFeature.MapSortField) + "\n");
    }

    /** Every public static int of {@code c} and its superclasses (ResponseCode extends RemotingSysResponseCode). */
    private static Map<String, Object> intConstants(Class<?> c) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (Class<?> k = c; k != null && k != Object.class; k = k.getSuperclass()) {
            for (Field f : k.getDeclaredFields()) {
                int m = f.getModifiers();
                if (Modifier.isStatic(m) && Modifier.isPublic(m) && f.getType() == int.class) {
                    out.putIfAbsent(f.getName(), f.getInt(null));
                }
            }
        }
        return out;
    }

    /** The instance fields RemotingCommand reads and writes for a header class, superclasses included. */
    private static List<Field> fields(Class<?> c) {
        List<Field> out = new ArrayList<>();
        for (Class<?> k = c; k != null && k != Object.class; k = k.getSuperclass()) {
            for (Field f : k.getDeclaredFields()) {
                if (!Modifier.isStatic(f.getModifiers()) && !f.getName().startsWith("this")) {
                    out.add(f);
                }
            }
        }
        return out;
    }

    private static Field field(Class<?> c, String name) {
        for (Field f : fields(c)) {
            if (f.getName().equals(name)) {
                f.setAccessible(true);
                return f;
            }
        }
        throw new IllegalArgumentException(c.getSimpleName() + " has no field " + name);
    }

    private static Object parse(Class<?> type, String text) throws Exception {
        if (type == String.class) {
            return text;
        } else if (type == Integer.class || type == int.class) {
            return Integer.parseInt(text);
        } else if (type == Long.class || type == long.class) {
            return Long.parseLong(text);
        } else if (type == Boolean.class || type == boolean.class) {
            return Boolean.parseBoolean(text);
        } else if (type == Double.class || type == double.class) {
            return Double.parseDouble(text);
        } else if (type.isEnum()) {
            Method getType = type.getMethod("getType", String.class);
            return getType.invoke(null, text);
        }
        throw new IllegalArgumentException("unsupported header field type " + type);
    }

    // ---- encode -------------------------------------------------------------------------

    private static void encode(JSONObject spec, Path out) throws Exception {
        Files.createDirectories(out);
        for (Object o : spec.getJSONArray("vectors")) {
            JSONObject v = (JSONObject) o;
            if (!onThisLine(v)) {
                continue;
            }
            JSONArray types = v.getJSONArray("types");
            for (SerializeType type : SerializeType.values()) {
                if (types != null && !types.contains(type.name())) {
                    continue;
                }
                byte[] frame = frame(build(v, type));
                Files.write(out.resolve(v.getString("name") + "." + type.name().toLowerCase() + ".bin"), frame);
            }
        }
    }

    private static RemotingCommand build(JSONObject v, SerializeType type) throws Exception {
        CommandCustomHeader header = null;
        JSONObject h = v.getJSONObject("header");
        if (h != null) {
            Class<?> c = cls(h.getString("class"));
            header = (CommandCustomHeader) c.getDeclaredConstructor().newInstance();
            for (Map.Entry<String, Object> e : h.getJSONObject("fields").entrySet()) {
                Field f = field(c, e.getKey());
                f.set(header, parse(f.getType(), String.valueOf(e.getValue())));
            }
        }
        RemotingCommand cmd = RemotingCommand.createRequestCommand(v.getIntValue("code"), header);
        cmd.setFlag(v.getIntValue("flag"));
        cmd.setOpaque(v.getIntValue("opaque"));
        cmd.setVersion(v.getIntValue("version"));
        if (v.containsKey("language")) {
            cmd.setLanguage(LanguageCode.valueOf(v.getString("language")));
        }
        cmd.setRemark(v.getString("remark"));
        JSONObject ext = v.getJSONObject("extFields");
        if (ext != null) {
            for (Map.Entry<String, Object> e : ext.entrySet()) {
                cmd.addExtField(e.getKey(), String.valueOf(e.getValue()));
            }
        }
        cmd.setSerializeTypeCurrentRPC(type);
        JSONObject body = v.getJSONObject("body");
        if (body != null) {
            cmd.setBody(body(body));
        }
        return cmd;
    }

    private static byte[] body(JSONObject b) throws Exception {
        if (b.containsKey("utf8")) {
            return b.getString("utf8").getBytes(StandardCharsets.UTF_8);
        }
        if (b.containsKey("hex")) {
            return HexFormat.of().parseHex(b.getString("hex"));
        }
        Class<?> c = cls(b.getString("class"));
        Object value = JSON.parseObject(b.getJSONObject("json").toJSONString(), c);
        if (b.getBooleanValue("compressed")) {
            return (byte[]) c.getMethod("encode", boolean.class).invoke(value, true);
        }
        JSONArray features = b.getJSONArray("features");
        if (features != null) {
            SerializerFeature[] fs = new SerializerFeature[features.size()];
            for (int i = 0; i < fs.length; i++) {
                fs[i] = SerializerFeature.valueOf(features.getString(i));
            }
            return JSON.toJSONString(value, fs).getBytes(StandardCharsets.UTF_8);
        }
        return JSON.toJSONString(value).getBytes(StandardCharsets.UTF_8);
    }

    /** The frame RocketMQ's NettyEncoder writes for {@code cmd}. */
    private static byte[] frame(RemotingCommand cmd) {
        EmbeddedChannel ch = new EmbeddedChannel(new NettyEncoder());
        ch.writeOutbound(cmd);
        ByteBuf out = Unpooled.buffer();
        for (Object m; (m = ch.readOutbound()) != null; ) {
            ByteBuf b = (ByteBuf) m;
            out.writeBytes(b);
            b.release();
        }
        ch.finishAndReleaseAll();
        byte[] bytes = new byte[out.readableBytes()];
        out.readBytes(bytes);
        if (bytes.length == 0) {
            throw new IllegalStateException("NettyEncoder wrote nothing for " + cmd);
        }
        return bytes;
    }

    // ---- decode -------------------------------------------------------------------------

    /**
     * Decodes each manifest entry {file, header?, body?: {class, compressed?}}: the command's
     * fields, the custom header RemotingCommand.decodeCommandCustomHeader makes of its extFields,
     * and the body as RocketMQ's own class reads it, written back by fastjson.
     */
    static List<Object> decode(JSONArray manifest) throws Exception {
        List<Object> out = new ArrayList<>();
        for (Object o : manifest) {
            JSONObject entry = (JSONObject) o;
            Map<String, Object> r = new TreeMap<>();
            r.put("file", entry.getString("file"));
            byte[] bytes = Files.readAllBytes(Path.of(entry.getString("file")));
            EmbeddedChannel ch = new EmbeddedChannel(new NettyDecoder());
            ch.writeInbound(Unpooled.wrappedBuffer(bytes));
            List<RemotingCommand> cmds = new ArrayList<>();
            for (Object m; (m = ch.readInbound()) != null; ) {
                cmds.add((RemotingCommand) m);
            }
            r.put("frames", cmds.size());
            r.put("open", ch.isOpen());
            ch.finishAndReleaseAll();
            if (cmds.size() == 1) {
                RemotingCommand cmd = cmds.get(0);
                r.put("code", cmd.getCode());
                r.put("language", cmd.getLanguage() == null ? null : cmd.getLanguage().name());
                r.put("version", cmd.getVersion());
                r.put("opaque", cmd.getOpaque());
                r.put("flag", cmd.getFlag());
                r.put("remark", cmd.getRemark());
                r.put("serializeType", cmd.getSerializeTypeCurrentRPC().name());
                r.put("extFields", pairs(cmd.getExtFields()));
                byte[] body = cmd.getBody();
                r.put("bodyHex", body == null ? null : HexFormat.of().formatHex(body));
                String headerClass = entry.getString("header");
                if (headerClass != null) {
                    try {
                        @SuppressWarnings("unchecked")
                        Class<? extends CommandCustomHeader> c = (Class<? extends CommandCustomHeader>) cls(headerClass);
                        CommandCustomHeader header = cmd.decodeCommandCustomHeader(c);
                        Map<String, Object> fields = new TreeMap<>();
                        for (Field f : fields(c)) {
                            f.setAccessible(true);
                            Object value = f.get(header);
                            if (value != null) {
                                fields.put(f.getName(), value.toString());
                            }
                        }
                        r.put("header", fields);
                    } catch (Exception e) {
                        r.put("headerError", e.toString());
                    }
                }
                JSONObject bodyClass = entry.getJSONObject("body");
                if (bodyClass != null && body != null) {
                    try {
                        Class<?> c = cls(bodyClass.getString("class"));
                        Object value;
                        if (bodyClass.getBooleanValue("compressed")) {
                            value = decodeCompressed(c, body);
                        } else {
                            value = JSON.parseObject(new String(body, StandardCharsets.UTF_8), c);
                        }
                        r.put("body", JSON.toJSONString(value, SerializerFeature.MapSortField));
                    } catch (Exception e) {
                        r.put("bodyError", e.toString());
                    }
                }
            }
            out.add(r);
        }
        return out;
    }

    /**
     * extFields as [key, value] pairs sorted by key: Java's map may hold a null key or value
     * (a zero-length string in a ROCKETMQ header), which a JSON object cannot show.
     */
    private static List<Object> pairs(Map<String, String> map) {
        if (map == null) {
            return null;
        }
        List<Object> out = new ArrayList<>();
        map.entrySet().stream()
            .sorted(java.util.Map.Entry.comparingByKey(java.util.Comparator.nullsFirst(java.util.Comparator.naturalOrder())))
            .forEach(e -> {
                List<Object> pair = new ArrayList<>();
                pair.add(e.getKey());
                pair.add(e.getValue());
                out.add(pair);
            });
        return out;
    }

    /** RegisterBrokerBody.decode(data, compressed[, broker version]): 5.x added the version. */
    private static Object decodeCompressed(Class<?> c, byte[] body) throws Exception {
        for (Method m : c.getMethods()) {
            if (!m.getName().equals("decode") || !Modifier.isStatic(m.getModifiers())) {
                continue;
            }
            Class<?>[] p = m.getParameterTypes();
            if (p.length == 2 && p[0] == byte[].class && p[1] == boolean.class) {
                return m.invoke(null, body, true);
            }
            if (p.length == 3 && p[0] == byte[].class && p[1] == boolean.class && p[2].isEnum()) {
                Object v5 = Enum.valueOf(p[2].asSubclass(Enum.class), "V5_0_0");
                return m.invoke(null, body, true, v5);
            }
        }
        throw new IllegalArgumentException(c.getSimpleName() + " has no compressed decode");
    }
}
