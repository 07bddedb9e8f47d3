// JDBC scenarios the client matrix lacks: `java -cp postgresql.jar library_feature_scenarios.java SCENARIO [ARGS]`
// prints one JSON line {scenario, error, crash, notices, result}.

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLWarning;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.postgresql.util.PSQLWarning;

public class Review5 {
    static final Map<String, String> ENV = System.getenv();
    static final String ITEMS = ENV.get("MATRIX_ITEMS");
    static final List<Map<String, Object>> notices = new ArrayList<>();

    static Connection open(Properties extra) throws SQLException {
        Properties p = new Properties();
        p.setProperty("user", ENV.get("MATRIX_USER"));
        p.setProperty("password", ENV.get("MATRIX_PASSWORD"));
        p.setProperty("sslmode", "disable");
        p.setProperty("ApplicationName", "review5-jdbc");
        p.setProperty("connectTimeout", "10");
        p.setProperty("socketTimeout", "60");
        if (extra != null) {
            p.putAll(extra);
        }
        String url = "jdbc:postgresql://" + ENV.get("MATRIX_HOST") + ":" + ENV.get("MATRIX_PORT") + "/" + ENV.get("MATRIX_DATABASE");
        return DriverManager.getConnection(url, p);
    }

    static void take(SQLWarning w) {
        for (; w != null; w = w.getNextWarning()) {
            Map<String, Object> n = new LinkedHashMap<>();
            n.put("conn", "main");
            if (w instanceof PSQLWarning pw && pw.getServerErrorMessage() != null) {
                n.put("severity", pw.getServerErrorMessage().getSeverity());
                n.put("code", pw.getServerErrorMessage().getSQLState());
                n.put("message", pw.getServerErrorMessage().getMessage());
                n.put("detail", pw.getServerErrorMessage().getDetail() == null ? "" : pw.getServerErrorMessage().getDetail());
            } else {
                n.put("severity", "");
                n.put("code", "");
                n.put("message", String.valueOf(w.getMessage()));
                n.put("detail", "");
            }
            notices.add(n);
        }
    }

    static void take(Connection c, Statement st) throws SQLException {
        if (st != null) {
            take(st.getWarnings());
            st.clearWarnings();
        }
        take(c.getWarnings());
        c.clearWarnings();
    }

    static long one(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            long v = rs.getLong(1);
            take(c, st);
            return v;
        }
    }

    static String oneStr(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            String v = rs.getString(1);
            take(c, st);
            return v;
        }
    }

    static void exec(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement()) {
            st.execute(sql);
            take(c, st);
        }
    }

    static Map<String, Object> serializableAutocommit() throws SQLException {
        Map<String, Object> r = new LinkedHashMap<>();
        try (Connection c = open(null)) {
            c.setTransactionIsolation(Connection.TRANSACTION_SERIALIZABLE);
            r.put("count", one(c, "SELECT count(*) FROM " + ITEMS));
            exec(c, "INSERT INTO " + ITEMS + " (v) VALUES ('jdbc serializable')");
            r.put("iso", oneStr(c, "SHOW transaction_isolation"));
            try (PreparedStatement ps = c.prepareStatement("SELECT v FROM " + ITEMS + " WHERE id = ?")) {
                for (int i = 1; i <= 6; i++) {
                    ps.setInt(1, i);
                    try (ResultSet rs = ps.executeQuery()) {
                        rs.next();
                    }
                    take(c, ps);
                }
            }
        }
        return r;
    }

    static Map<String, Object> serializableReadonlyTx() throws SQLException {
        Map<String, Object> r = new LinkedHashMap<>();
        try (Connection c = open(null)) {
            c.setTransactionIsolation(Connection.TRANSACTION_SERIALIZABLE);
            c.setAutoCommit(false);
            c.setReadOnly(true);
            r.put("count", one(c, "SELECT count(*) FROM " + ITEMS));
            r.put("iso", oneStr(c, "SHOW transaction_isolation"));
            c.commit();
            c.setReadOnly(false);
            exec(c, "INSERT INTO " + ITEMS + " (v) VALUES ('jdbc serializable rw')");
            c.commit();
        }
        return r;
    }

    static Map<String, Object> autosaveAlways(String value) throws SQLException {
        Map<String, Object> r = new LinkedHashMap<>();
        Properties p = new Properties();
        p.setProperty("autosave", "always");
        try (Connection c = open(p)) {
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + ITEMS + " (v) VALUES (?)")) {
                ps.setString(1, value);
                ps.executeUpdate();
                take(c, ps);
            }
            String failed = "";
            try {
                one(c, "SELECT 1 / (SELECT count(*) - count(*) FROM " + ITEMS + ")");
            } catch (SQLException e) {
                failed = e.getSQLState();
            }
            r.put("failed", failed);
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + ITEMS + " (v) VALUES (?)")) {
                ps.setString(1, value);
                ps.executeUpdate();
                take(c, ps);
            }
            r.put("inTx", one(c, "SELECT count(*) FROM " + ITEMS + " WHERE v = '" + value + "'"));
            c.commit();
        }
        return r;
    }

    static Map<String, Object> prepareThreshold() throws SQLException {
        Map<String, Object> r = new LinkedHashMap<>();
        Properties p = new Properties();
        p.setProperty("prepareThreshold", "1");
        p.setProperty("options", "-c search_path=review5_none,public");
        int ok = 0;
        try (Connection c = open(p)) {
            r.put("search_path", oneStr(c, "SHOW search_path"));
            try (PreparedStatement read = c.prepareStatement("SELECT v FROM " + ITEMS + " WHERE id = ?");
                 PreparedStatement write = c.prepareStatement("INSERT INTO " + ITEMS + " (v) VALUES (?) RETURNING id")) {
                for (int i = 1; i <= 20; i++) {
                    int id = (i - 1) % 10 + 1;
                    read.setInt(1, id);
                    try (ResultSet rs = read.executeQuery()) {
                        if (rs.next() && ("item " + id).equals(rs.getString(1))) {
                            ok++;
                        }
                    }
                    take(c, read);
                    write.setString(1, "threshold " + i);
                    try (ResultSet rs = write.executeQuery()) {
                        rs.next();
                    }
                    take(c, write);
                    if (i == 10) {
                        c.setAutoCommit(false);
                    }
                    if (i == 15) {
                        c.commit();
                        c.setAutoCommit(true);
                    }
                }
            }
        }
        r.put("ok", ok);
        return r;
    }

    static Map<String, Object> batchRewrite(String value) throws SQLException {
        Map<String, Object> r = new LinkedHashMap<>();
        for (String rewrite : new String[]{"true", "false"}) {
            Properties p = new Properties();
            p.setProperty("reWriteBatchedInserts", rewrite);
            try (Connection c = open(p)) {
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + ITEMS + " (v) VALUES (?)")) {
                    for (int i = 0; i < 100; i++) {
                        ps.setString(1, value + "-" + rewrite + "-" + i);
                        ps.addBatch();
                    }
                    ps.executeBatch();
                    take(c, ps);
                }
                if (rewrite.equals("false")) {
                    c.setAutoCommit(false);
                    try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + ITEMS + " (v) VALUES (?)")) {
                        for (int i = 0; i < 100; i++) {
                            ps.setString(1, value + "-tx-" + i);
                            ps.addBatch();
                        }
                        ps.executeBatch();
                    }
                    c.commit();
                }
            }
        }
        return r;
    }

    static Map<String, Object> readonlyAlways() throws SQLException {
        Map<String, Object> r = new LinkedHashMap<>();
        Properties p = new Properties();
        p.setProperty("readOnlyMode", "always");
        try (Connection c = open(p)) {
            c.setReadOnly(true);
            r.put("count", one(c, "SELECT count(*) FROM " + ITEMS));
            String code = "", msg = "";
            try {
                exec(c, "INSERT INTO " + ITEMS + " (v) VALUES ('readonly always')");
            } catch (SQLException e) {
                code = e.getSQLState();
                msg = e.getMessage();
            }
            r.put("write_code", code);
            r.put("write_msg", msg);
            c.setReadOnly(false);
            exec(c, "INSERT INTO " + ITEMS + " (v) VALUES ('readonly off again')");
        }
        return r;
    }

    static Map<String, Object> fetchSizeRwTx() throws SQLException {
        Map<String, Object> r = new LinkedHashMap<>();
        try (Connection c = open(null)) {
            c.setAutoCommit(false);
            exec(c, "INSERT INTO " + ITEMS + " (v) VALUES ('fetch size tx')");
            long rows = 0, sum = 0;
            try (PreparedStatement ps = c.prepareStatement("SELECT g FROM generate_series(1, 1000) g")) {
                ps.setFetchSize(7);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        rows++;
                        sum += rs.getLong(1);
                        if (rows % 100 == 0) {
                            // another statement while the portal is open
                            one(c, "SELECT " + rows);
                        }
                    }
                }
            }
            c.commit();
            r.put("rows", rows);
            r.put("sum", sum);
        }
        return r;
    }

    public static void main(String[] args) {
        String scenario = args[0];
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("scenario", scenario);
        out.put("error", null);
        out.put("crash", "");
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            result = switch (scenario) {
                case "serializable_autocommit" -> serializableAutocommit();
                case "serializable_readonly_tx" -> serializableReadonlyTx();
                case "autosave_always" -> autosaveAlways(args[1]);
                case "prepare_threshold" -> prepareThreshold();
                case "batch_rewrite" -> batchRewrite(args[1]);
                case "readonly_always" -> readonlyAlways();
                case "fetch_size_rw_tx" -> fetchSizeRwTx();
                default -> throw new IllegalArgumentException("unknown scenario " + scenario);
            };
        } catch (SQLException e) {
            Map<String, Object> err = new LinkedHashMap<>();
            err.put("code", e.getSQLState() == null ? "" : e.getSQLState());
            err.put("message", String.valueOf(e.getMessage()));
            out.put("error", err);
        } catch (Exception e) {
            java.io.StringWriter sw = new java.io.StringWriter();
            e.printStackTrace(new java.io.PrintWriter(sw));
            out.put("crash", sw.toString());
        }
        out.put("result", result);
        out.put("notices", notices);
        System.out.println(json(out));
    }

    static String json(Object o) {
        if (o == null) {
            return "null";
        }
        if (o instanceof Number || o instanceof Boolean) {
            return o.toString();
        }
        if (o instanceof Map<?, ?> m) {
            StringBuilder b = new StringBuilder("{");
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) b.append(',');
                first = false;
                b.append(json(String.valueOf(e.getKey()))).append(':').append(json(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (o instanceof List<?> l) {
            StringBuilder b = new StringBuilder("[");
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) b.append(',');
                b.append(json(l.get(i)));
            }
            return b.append(']').toString();
        }
        String s = o.toString();
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
                    else b.append(ch);
                }
            }
        }
        return b.append('"').toString();
    }
}
