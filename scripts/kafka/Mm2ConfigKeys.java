// Prints every key MirrorMaker 2's own configuration definitions declare, read from the
// connect-mirror jar on the class path, one per line, tab-separated and sorted:
//
//   <definition> <key>
//
// where <definition> is where MM2 declares it:
//
//   MirrorMakerConfig        the top level of an mm2.properties file (MirrorMakerConfig's ConfigDef)
//   MirrorConnectorConfig    every connector's common keys (BASE_CONNECTOR_CONFIG_DEF, with
//                            Kafka Connect's own connector keys)
//   MirrorSourceConfig       MirrorSourceConnector's keys (CONNECTOR_CONFIG_DEF)
//   MirrorCheckpointConfig   MirrorCheckpointConnector's keys (CONNECTOR_CONFIG_DEF)
//   MirrorHeartbeatConfig    MirrorHeartbeatConnector's keys (CONNECTOR_CONFIG_DEF)
//   MirrorClientConfig       MirrorClient's keys (CONFIG_DEF)
//   MirrorClientConfig.client   the keys MM2 hands every client of a cluster (CLIENT_CONFIG_DEF)
//
// The definitions are not public API, so they are read by reflection. Run as a single-file
// program (Java 17+, no javac step), with MirrorMaker 2's jars on the class path:
//
//   java -cp "$(scripts/test-broker mm2-classpath)" scripts/kafka/Mm2ConfigKeys.java
//
// crates/strait/tests/mm2_keys.rs checks that strait's key catalogue knows each key printed.

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.TreeSet;

import org.apache.kafka.common.config.ConfigDef;

public class Mm2ConfigKeys {
    private static final String PACKAGE = "org.apache.kafka.connect.mirror.";

    public static void main(String[] args) throws Exception {
        TreeSet<String> lines = new TreeSet<>();
        add(lines, "MirrorMakerConfig", fromMethod("MirrorMakerConfig", "config"));
        add(lines, "MirrorConnectorConfig", fromField("MirrorConnectorConfig", "BASE_CONNECTOR_CONFIG_DEF"));
        add(lines, "MirrorSourceConfig", fromField("MirrorSourceConfig", "CONNECTOR_CONFIG_DEF"));
        add(lines, "MirrorCheckpointConfig", fromField("MirrorCheckpointConfig", "CONNECTOR_CONFIG_DEF"));
        add(lines, "MirrorHeartbeatConfig", fromField("MirrorHeartbeatConfig", "CONNECTOR_CONFIG_DEF"));
        add(lines, "MirrorClientConfig", fromField("MirrorClientConfig", "CONFIG_DEF"));
        add(lines, "MirrorClientConfig.client", fromField("MirrorClientConfig", "CLIENT_CONFIG_DEF"));
        for (String line : lines) {
            System.out.println(line);
        }
    }

    private static void add(TreeSet<String> lines, String definition, ConfigDef def) {
        if (def.names().isEmpty()) {
            throw new IllegalStateException(definition + " declares no key");
        }
        for (String key : def.names()) {
            lines.add(definition + "\t" + key);
        }
    }

    private static ConfigDef fromField(String className, String field) throws Exception {
        Field f = Class.forName(PACKAGE + className).getDeclaredField(field);
        f.setAccessible(true);
        return (ConfigDef) f.get(null);
    }

    private static ConfigDef fromMethod(String className, String method) throws Exception {
        Method m = Class.forName(PACKAGE + className).getDeclaredMethod(method);
        m.setAccessible(true);
        return (ConfigDef) m.invoke(null);
    }
}
