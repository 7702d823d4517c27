// Runs Kafka's own AdminUtils.assignReplicasToBrokers for cases read from stdin, one per line:
//   brokers(comma) racks(comma, "-" for none, "" for no rack map) nPartitions rf fixedStartIndex startPartitionId
// and prints one line per case: the assignment as "p:b,b,b;p:b,b,b" or "error:<ExceptionClass>:<message>".
// java -cp '<jars>/*' tools/kafka/adminutils/AssignOracle.java < cases
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.*;
import org.apache.kafka.admin.AdminUtils;
import org.apache.kafka.admin.BrokerMetadata;

public class AssignOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split("\t", -1);
            String[] ids = f[0].isEmpty() ? new String[0] : f[0].split(",");
            String[] racks = f[1].isEmpty() ? new String[0] : f[1].split(",");
            List<BrokerMetadata> brokers = new ArrayList<>();
            for (int i = 0; i < ids.length; i++) {
                Optional<String> rack = (racks.length == 0 || racks[i].equals("-")) ? Optional.empty() : Optional.of(racks[i]);
                brokers.add(new BrokerMetadata(Integer.parseInt(ids[i]), rack));
            }
            try {
                Map<Integer, List<Integer>> result = AdminUtils.assignReplicasToBrokers(brokers,
                    Integer.parseInt(f[2]), Integer.parseInt(f[3]), Integer.parseInt(f[4]), Integer.parseInt(f[5]));
                StringBuilder out = new StringBuilder();
                for (Integer p : new TreeSet<>(result.keySet())) {
                    if (out.length() > 0) out.append(';');
                    out.append(p).append(':');
                    List<Integer> replicas = result.get(p);
                    for (int j = 0; j < replicas.size(); j++) out.append(j == 0 ? "" : ",").append(replicas.get(j));
                }
                System.out.println(out);
            } catch (Exception e) {
                System.out.println("error:" + e.getClass().getSimpleName() + ":" + e.getMessage());
            }
        }
    }
}
