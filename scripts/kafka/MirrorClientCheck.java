// Asks MirrorMaker 2's own client library (connect-mirror-client: MirrorClient and
// RemoteClusterUtils) what it reads from one cluster's MM2 topics, and prints the answers one per
// line, tab-separated, sorted, so a test can compare them with what strait wrote.
//
// Run as a single-file program (Java 17+, no javac step), with MirrorMaker 2's jars on the class
// path:
//
//   java -cp "$(scripts/test-broker mm2-classpath)" scripts/kafka/MirrorClientCheck.java \
//       --bootstrap 127.0.0.1:29092 --source A [--group G]... [--hops ALIAS]... [--timeout-ms 20000]
//
// --bootstrap is the cluster the MM2 topics are on (the target of the flow); --source the alias of
// the cluster whose checkpoints are translated (`<source>.checkpoints.internal`). Output:
//
//   checkpointTopics   <topic>...          MirrorClient.checkpointTopics()
//   heartbeatTopics    <topic>...          MirrorClient.heartbeatTopics()
//   upstreamClusters   <alias>...          MirrorClient.upstreamClusters()
//   remoteTopics       <topic>...          MirrorClient.remoteTopics(source)
//   replicationHops    <alias> <hops>      MirrorClient.replicationHops(alias), per --hops
//   translate <group> <topic> <partition> <offset> <metadata>
//                                          RemoteClusterUtils.translateOffsets(props, source, group)
//   translated <group> <count>             how many partitions that gave (0 is printed too)
//
// Exits 3 without translating when the checkpoints topic does not exist (translateOffsets would
// wait out default.api.timeout.ms, 60 s, before failing).

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.MirrorClient;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

public class MirrorClientCheck {
    public static void main(String[] args) throws Exception {
        String bootstrap = null;
        String source = null;
        long timeoutMs = 20_000;
        List<String> groups = new ArrayList<>();
        List<String> hops = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            String value = i + 1 < args.length ? args[i + 1] : null;
            if (value == null) {
                usage("missing value for " + args[i]);
            }
            switch (args[i]) {
                case "--bootstrap" -> bootstrap = value;
                case "--source" -> source = value;
                case "--group" -> groups.add(value);
                case "--hops" -> hops.add(value);
                case "--timeout-ms" -> timeoutMs = Long.parseLong(value);
                default -> usage("unknown argument " + args[i]);
            }
            i++;
        }
        if (bootstrap == null || source == null) {
            usage("--bootstrap and --source are required");
        }

        // Only bootstrap.servers (and security settings, none here) reach MirrorClient's internal
        // admin and consumer (MirrorClientConfig).
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", bootstrap);

        String checkpointsTopic;
        try (MirrorClient client = new MirrorClient(props)) {
            Set<String> checkpointTopics = client.checkpointTopics();
            print("checkpointTopics", checkpointTopics);
            print("heartbeatTopics", client.heartbeatTopics());
            print("upstreamClusters", client.upstreamClusters());
            print("remoteTopics", client.remoteTopics(source));
            for (String alias : hops) {
                System.out.println("replicationHops\t" + alias + "\t" + client.replicationHops(alias));
            }
            checkpointsTopic = client.replicationPolicy().checkpointsTopic(source);
            if (!groups.isEmpty() && !checkpointTopics.contains(checkpointsTopic)) {
                System.out.flush();
                System.err.println("MirrorClientCheck: no topic " + checkpointsTopic + " on " + bootstrap);
                System.exit(3);
            }
        }

        Duration timeout = Duration.ofMillis(timeoutMs);
        for (String group : groups) {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, source, group, timeout);
            offsets.entrySet().stream()
                .sorted(Map.Entry.comparingByKey(
                    Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition)))
                .forEach(e -> System.out.println(String.join("\t",
                    "translate",
                    group,
                    e.getKey().topic(),
                    Integer.toString(e.getKey().partition()),
                    Long.toString(e.getValue().offset()),
                    e.getValue().metadata() == null ? "" : e.getValue().metadata())));
            System.out.println("translated\t" + group + "\t" + offsets.size());
        }
    }

    private static void print(String what, Collection<String> names) {
        StringBuilder line = new StringBuilder(what);
        for (String name : new TreeSet<>(names)) {
            line.append('\t').append(name);
        }
        System.out.println(line);
    }

    private static void usage(String problem) {
        System.err.println("MirrorClientCheck: " + problem);
        System.err.println("usage: MirrorClientCheck --bootstrap HOST:PORT --source ALIAS"
            + " [--group GROUP]... [--hops ALIAS]... [--timeout-ms MS]");
        System.exit(2);
    }
}
