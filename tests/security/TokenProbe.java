import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;

/**
 * The real Java Kafka client (whichever kafka-clients jar is on the classpath) with the
 * settings the monitor renders, driven by the test (tests/security/test_oauth_lab.py).
 *
 * Arguments: name=client.properties ... Prints "ready", then reads commands from stdin:
 * "allow URL" sets the system property org.apache.kafka.sasl.oauthbearer.allowed.urls;
 * "try NAME" creates that client's Admin and closes it again ("created NAME" or "refused
 * NAME message"); "run SECONDS" creates every client and asks each for the cluster id once a
 * second for that long ("NAME ok EPOCH" or "NAME FAIL EPOCH message"), then exits.
 */
public final class TokenProbe {
    public static void main(String[] args) throws Exception {
        Map<String, Properties> clients = new LinkedHashMap<>();
        for (String arg : args) {
            String[] pair = arg.split("=", 2);
            Properties props = new Properties();
            try (FileInputStream in = new FileInputStream(pair[1])) {
                props.load(in);
            }
            clients.put(pair[0], props);
        }
        System.out.println("ready");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = stdin.readLine()) != null) {
            String[] command = line.trim().split(" ", 2);
            if (command[0].equals("allow")) {
                System.setProperty("org.apache.kafka.sasl.oauthbearer.allowed.urls", command[1]);
                System.out.println("allowed");
            } else if (command[0].equals("try")) {
                try (Admin admin = Admin.create(clients.get(command[1]))) {
                    System.out.println("created " + command[1]);
                } catch (Exception e) {
                    System.out.println("refused " + command[1] + " " + rootMessage(e));
                }
            } else if (command[0].equals("run")) {
                run(clients, Long.parseLong(command[1]));
                return;
            }
        }
    }

    private static void run(Map<String, Properties> clients, long seconds) throws Exception {
        Map<String, Admin> admins = new LinkedHashMap<>();
        for (Map.Entry<String, Properties> c : clients.entrySet()) {
            try {
                admins.put(c.getKey(), Admin.create(c.getValue()));
            } catch (Exception e) {
                System.out.println(c.getKey() + " FAIL 0 " + rootMessage(e));
            }
        }
        long end = System.currentTimeMillis() + seconds * 1000;
        while (System.currentTimeMillis() < end) {
            for (Map.Entry<String, Admin> a : admins.entrySet()) {
                long now = System.currentTimeMillis() / 1000;
                try {
                    a.getValue().describeCluster().clusterId().get();
                    System.out.println(a.getKey() + " ok " + now);
                } catch (Exception e) {
                    System.out.println(a.getKey() + " FAIL " + now + " " + rootMessage(e));
                }
            }
            Thread.sleep(1000);
        }
        for (Admin a : admins.values()) {
            a.close();
        }
    }

    private static String rootMessage(Throwable e) {
        Throwable t = e;
        while (t.getCause() != null) {
            t = t.getCause();
        }
        return t.getClass().getSimpleName() + ": " + String.valueOf(t.getMessage()).replace('\n', ' ');
    }
}
