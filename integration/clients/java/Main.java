// PostgreSQL JDBC driver for pgowl's client matrix (integration/clients).
//
// Run in source-file mode: java -cp /usr/share/java/postgresql.jar Main.java
//
// It reads one step per line on stdin (the step's name and arguments,
// separated by tabs) and answers each with one JSON line on stdout:
// {step, error: {code, message} | null, notices: [...], result: {...}, crash}.
// Connection settings come from MATRIX_HOST, MATRIX_PORT, MATRIX_USER,
// MATRIX_PASSWORD and MATRIX_DATABASE; the tables from MATRIX_ITEMS and
// MATRIX_COPY.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringReader;
import java.io.StringWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.sql.BatchUpdateException;
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
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.postgresql.copy.CopyManager;
import org.postgresql.util.PSQLWarning;
import org.postgresql.util.ServerErrorMessage;

public class Main {
    static final Map<String, String> ENV = System.getenv();
    static final String ITEMS = ENV.get("MATRIX_ITEMS");
    static final String COPY_TABLE = ENV.get("MATRIX_COPY");

    /** The driver's open connections by name: main, simple, tx, ro, listener, large. */
    static final Map<String, Connection> conns = new LinkedHashMap<>();
    /** Every NOTICE any connection or statement received during the current step. */
    static final List<Map<String, Object>> notices = new ArrayList<>();
    static final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "matrix-timer");
        t.setDaemon(true);
        return t;
    });

    /** A database error together with the results the step still produced. */
    static final class StepError extends Exception {
        final SQLException err;
        final Map<String, Object> result;

        StepError(SQLException err, Map<String, Object> result) {
            super(err);
            this.err = err;
            this.result = result;
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(System.out, true, StandardCharsets.UTF_8);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] fields = line.split("\t", -1);
            if (fields[0].equals("quit")) {
                break;
            }
            String[] stepArgs = new String[fields.length - 1];
            System.arraycopy(fields, 1, stepArgs, 0, stepArgs.length);
            out.println(Json.encode(runStep(fields[0], stepArgs)));
        }
        for (Connection c : conns.values()) {
            c.close();
        }
    }

    static Map<String, Object> runStep(String name, String[] a) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("step", name);
        out.put("error", null);
        Map<String, Object> result = new LinkedHashMap<>();
        String crash = "";
        notices.clear();
        try {
            switch (name) {
                case "connect" -> result = connectStep();
                case "auth_bad" -> result = authBad();
                case "simple_read" -> result = simpleRead(a[0]);
                case "simple_write" -> result = simpleWrite(a[0]);
                case "extended_read" -> result = extendedRead(a[0]);
                case "extended_write" -> result = extendedWrite(a[0]);
                case "prepared" -> result = prepared(a[0], a[1], Integer.parseInt(a[2]));
                case "tx_commit" -> result = txCommit(a[0], a[1]);
                case "tx_rollback" -> result = txRollback(a[0]);
                case "tx_readonly" -> result = txReadOnly(a[0]);
                case "copy_in" -> result = copyIn(Integer.parseInt(a[0]));
                case "copy_out" -> result = copyOut(a[0]);
                case "batch_error" -> result = batchError(a[0], a[1]);
                case "cancel" -> result = cancel();
                case "listen" -> result = listen(a[0]);
                case "notify" -> result = notifyStep(a[0], a[1]);
                case "wait_notification" -> result = waitNotification(Integer.parseInt(a[0]));
                case "poll_notification" -> result = pollNotification();
                case "listener_read" -> result = listenerRead(a[0]);
                case "unlisten" -> result = unlisten();
                case "large" -> result = large(a[0], Integer.parseInt(a[1]), Integer.parseInt(a[2]), a.length > 3 ? a[3] : "");
                case "simple_mode_batch_error" -> result = simpleModeBatchError(a[0], a[1]);
                case "ryw_rounds" -> result = rywRounds(a[0], Integer.parseInt(a[1]));
                default -> crash = "unknown step " + name;
            }
        } catch (StepError e) {
            out.put("error", errorOf(e.err));
            result = e.result;
        } catch (SQLException e) {
            out.put("error", errorOf(e));
        } catch (Exception e) {
            StringWriter trace = new StringWriter();
            e.printStackTrace(new PrintWriter(trace));
            crash = trace.toString();
        }
        for (Map.Entry<String, Connection> e : conns.entrySet()) {
            try {
                if (!e.getValue().isClosed()) {
                    take(e.getKey(), e.getValue().getWarnings());
                    e.getValue().clearWarnings();
                }
            } catch (SQLException ignored) {
                // A broken connection has no warnings to give.
            }
        }
        out.put("notices", new ArrayList<>(notices));
        out.put("result", result);
        out.put("crash", crash);
        return out;
    }

    static Map<String, Object> errorOf(SQLException e) {
        SQLException cause = e;
        if (e instanceof BatchUpdateException && e.getNextException() != null) {
            cause = e.getNextException();
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("code", cause.getSQLState() == null ? "" : cause.getSQLState());
        m.put("message", String.valueOf(cause.getMessage()));
        return m;
    }

    static Connection open(String name, String port, String password, Properties extra) throws SQLException {
        Properties p = new Properties();
        p.setProperty("user", ENV.get("MATRIX_USER"));
        p.setProperty("password", password);
        p.setProperty("sslmode", "disable");
        p.setProperty("ApplicationName", "matrix-jdbc");
        p.setProperty("connectTimeout", "10");
        if (extra != null) {
            p.putAll(extra);
        }
        String url = "jdbc:postgresql://" + ENV.get("MATRIX_HOST") + ":" + port + "/" + ENV.get("MATRIX_DATABASE");
        Connection c = DriverManager.getConnection(url, p);
        conns.put(name, c);
        return c;
    }

    static Connection conn(String name) throws SQLException {
        Connection c = conns.get(name);
        if (c != null) {
            return c;
        }
        Properties extra = new Properties();
        switch (name) {
            case "simple" -> extra.setProperty("preferQueryMode", "simple");
            default -> { }
        }
        c = open(name, ENV.get("MATRIX_PORT"), ENV.get("MATRIX_PASSWORD"), extra);
        switch (name) {
            case "tx" -> c.setAutoCommit(false);
            case "ro" -> {
                // readOnlyMode=transaction (the default) makes the driver send BEGIN READ ONLY.
                c.setAutoCommit(false);
                c.setReadOnly(true);
            }
            default -> { }
        }
        return c;
    }

    static void close(String name) throws SQLException {
        Connection c = conns.remove(name);
        if (c != null) {
            take(name, c.getWarnings());
            c.close();
        }
    }

    /** take records a warning chain as NOTICEs received on connection name. */
    static void take(String name, SQLWarning w) {
        for (; w != null; w = w.getNextWarning()) {
            Map<String, Object> n = new LinkedHashMap<>();
            n.put("conn", name);
            if (w instanceof PSQLWarning pw && pw.getServerErrorMessage() != null) {
                ServerErrorMessage m = pw.getServerErrorMessage();
                n.put("severity", nz(m.getSeverity()));
                n.put("code", nz(m.getSQLState()));
                n.put("message", nz(m.getMessage()));
                n.put("detail", nz(m.getDetail()));
            } else {
                n.put("severity", "");
                n.put("code", nz(w.getSQLState()));
                n.put("message", nz(w.getMessage()));
                n.put("detail", "");
            }
            notices.add(n);
        }
    }

    static void take(String name, Statement st) throws SQLException {
        take(name, st.getWarnings());
        st.clearWarnings();
    }

    static String nz(String s) {
        return s == null ? "" : s;
    }

    static Object scalar(String connName, String sql, Object... params) throws SQLException {
        try (PreparedStatement st = conn(connName).prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++) {
                st.setObject(i + 1, params[i]);
            }
            try (ResultSet rs = st.executeQuery()) {
                rs.next();
                Object v = rs.getObject(1);
                take(connName, st);
                return v;
            } finally {
                take(connName, st);
            }
        }
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    static Map<String, Object> connectStep() throws SQLException {
        return map("user", scalar("main", "SELECT current_user"));
    }

    static Map<String, Object> authBad() throws SQLException {
        open("bad", ENV.get("MATRIX_PORT"), "wrong-" + ENV.get("MATRIX_PASSWORD"), null);
        close("bad");
        return map();
    }

    /**
     * rywRounds checks read your writes on one connection (session scope): it
     * writes a row and reads it back at once, n times. Only the reads'
     * NOTICEs are reported (connection ryw_read).
     */
    static Map<String, Object> rywRounds(String table, int n) throws SQLException {
        Connection c = conn("ryw_read");
        int stale = 0;
        String first = "";
        try (PreparedStatement w = c.prepareStatement("UPDATE " + table + " SET v = ? WHERE k = 1");
             PreparedStatement r = c.prepareStatement("SELECT v FROM " + table + " WHERE k = 1")) {
            for (int i = 1; i <= n; i++) {
                w.setInt(1, i);
                w.executeUpdate();
                w.clearWarnings();
                c.clearWarnings();
                int got;
                try (ResultSet rs = r.executeQuery()) {
                    rs.next();
                    got = rs.getInt(1);
                }
                take("ryw_read", r);
                take("ryw_read", c.getWarnings());
                c.clearWarnings();
                if (got < i) {
                    stale++;
                    if (first.isEmpty()) {
                        first = "round " + i + " read " + got;
                    }
                }
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("rounds", n);
        out.put("stale", stale);
        out.put("first_stale", first);
        return out;
    }

    static Map<String, Object> simpleRead(String tag) throws SQLException {
        // preferQueryMode=simple: the driver sends a simple Query.
        return map("count", scalar("simple", "SELECT /* " + tag + " */ count(*) FROM " + ITEMS));
    }

    static Map<String, Object> simpleWrite(String tag) throws SQLException {
        try (Statement st = conn("simple").createStatement()) {
            int n = st.executeUpdate("INSERT /* " + tag + " */ INTO " + ITEMS + " (v) VALUES ('simple write')");
            take("simple", st);
            return map("rowcount", n);
        }
    }

    static Map<String, Object> extendedRead(String tag) throws SQLException {
        return map("v", scalar("main", "SELECT /* " + tag + " */ v FROM " + ITEMS + " WHERE id = ?", 3));
    }

    static Map<String, Object> extendedWrite(String tag) throws SQLException {
        return map("id", scalar("main", "INSERT /* " + tag + " */ INTO " + ITEMS + " (v) VALUES (?) RETURNING id", "extended write"));
    }

    static Map<String, Object> prepared(String readTag, String writeTag, int n) throws SQLException, StepError {
        // The driver uses an unnamed statement for the first executions of a
        // PreparedStatement and a named server-side one from the
        // prepareThreshold-th (5) on: n > 5 covers both.
        Connection c = conn("main");
        int reads = 0;
        int writes = 0;
        try (PreparedStatement r = c.prepareStatement("SELECT /* " + readTag + " */ v FROM " + ITEMS + " WHERE id = ?");
             PreparedStatement w = c.prepareStatement("INSERT /* " + writeTag + " */ INTO " + ITEMS + " (v) VALUES (?) RETURNING id")) {
            try {
                for (int i = 1; i <= n; i++) {
                    int id = (i - 1) % 10 + 1;
                    r.setInt(1, id);
                    try (ResultSet rs = r.executeQuery()) {
                        if (rs.next() && ("item " + id).equals(rs.getString(1))) {
                            reads++;
                        }
                    }
                    take("main", r);
                    w.setString(1, "prepared " + i);
                    try (ResultSet rs = w.executeQuery()) {
                        if (rs.next()) {
                            writes++;
                        }
                    }
                    take("main", w);
                }
            } catch (SQLException e) {
                throw new StepError(e, map("reads", reads, "writes", writes));
            }
        }
        return map("reads", reads, "writes", writes);
    }

    static Map<String, Object> txCommit(String tag, String value) throws SQLException {
        // With autocommit off the driver sends BEGIN together with the first statement.
        Connection c = conn("tx");
        try {
            Object id = scalar("tx", "INSERT INTO " + ITEMS + " (v) VALUES (?) RETURNING id", value);
            Object seen = scalar("tx", "SELECT /* " + tag + " */ v FROM " + ITEMS + " WHERE id = ?", id);
            c.commit();
            return map("id", id, "seen", seen);
        } catch (SQLException e) {
            c.rollback();
            throw e;
        }
    }

    static Map<String, Object> txRollback(String value) throws SQLException {
        Connection c = conn("tx");
        try (PreparedStatement st = c.prepareStatement("INSERT INTO " + ITEMS + " (v) VALUES (?)")) {
            st.setString(1, value);
            st.executeUpdate();
            take("tx", st);
        }
        c.rollback();
        return map();
    }

    static Map<String, Object> txReadOnly(String tag) throws SQLException {
        Connection c = conn("ro");
        try {
            Object count = scalar("ro", "SELECT /* " + tag + " */ count(*) FROM " + ITEMS);
            c.commit();
            return map("count", count);
        } catch (SQLException e) {
            c.rollback();
            throw e;
        }
    }

    static Map<String, Object> copyIn(int n) throws Exception {
        StringBuilder data = new StringBuilder();
        for (int i = 1; i <= n; i++) {
            data.append(i).append("\tcopy row ").append(i).append('\n');
        }
        CopyManager cm = conn("main").unwrap(PGConnection.class).getCopyAPI();
        long rows = cm.copyIn("COPY " + COPY_TABLE + " (id, v) FROM STDIN", new StringReader(data.toString()));
        return map("rows", rows);
    }

    /** LineCounter counts COPY lines and sums their first column. */
    static final class LineCounter extends Writer {
        long lines;
        long idSum;
        final StringBuilder current = new StringBuilder();

        @Override
        public void write(char[] buf, int off, int len) {
            for (int i = off; i < off + len; i++) {
                if (buf[i] == '\n') {
                    lines++;
                    String line = current.toString();
                    idSum += Long.parseLong(line.substring(0, line.indexOf('\t')));
                    current.setLength(0);
                } else {
                    current.append(buf[i]);
                }
            }
        }

        @Override
        public void flush() {
        }

        @Override
        public void close() {
        }
    }

    static Map<String, Object> copyOut(String tag) throws Exception {
        LineCounter sink = new LineCounter();
        CopyManager cm = conn("main").unwrap(PGConnection.class).getCopyAPI();
        cm.copyOut("COPY /* " + tag + " */ " + COPY_TABLE + " TO STDOUT", sink);
        return map("lines", sink.lines, "id_sum", sink.idSum);
    }

    static Map<String, Object> batchError(String first, String third) throws SQLException, StepError {
        // executeBatch sends the three statements in one pipeline ending in a
        // single Sync: the failing second one rolls the first one back.
        SQLException failure = null;
        try (Statement fail = conn("main").createStatement()) {
            fail.addBatch("INSERT INTO " + ITEMS + " (v) VALUES ('" + first + "')");
            fail.addBatch("INSERT INTO " + ITEMS + " (v) SELECT (1 / (count(*) - count(*)))::text FROM " + ITEMS);
            fail.addBatch("INSERT INTO " + ITEMS + " (v) VALUES ('" + third + "')");
            try {
                fail.executeBatch();
            } catch (SQLException e) {
                failure = e;
            }
            take("main", fail);
        }
        Map<String, Object> result = map("after", scalar("main", "SELECT 40 + ?", 2));
        if (failure != null) {
            throw new StepError(failure, result);
        }
        return result;
    }

    static Map<String, Object> simpleModeBatchError(String first, String third) throws SQLException, StepError {
        // The same batch with preferQueryMode=simple: one simple Query per statement.
        SQLException failure = null;
        Connection c = conn("simple");
        try (Statement fail = c.createStatement()) {
            fail.addBatch("INSERT INTO " + ITEMS + " (v) VALUES ('" + first + "')");
            fail.addBatch("INSERT INTO " + ITEMS + " (v) SELECT (1 / (count(*) - count(*)))::text FROM " + ITEMS);
            fail.addBatch("INSERT INTO " + ITEMS + " (v) VALUES ('" + third + "')");
            try {
                fail.executeBatch();
            } catch (SQLException e) {
                failure = e;
            }
            take("simple", fail);
        }
        Map<String, Object> result = map("after", scalar("simple", "SELECT 40 + 2"));
        if (failure != null) {
            throw new StepError(failure, result);
        }
        return result;
    }

    static Map<String, Object> cancel() throws SQLException, StepError {
        // Statement.cancel() from another thread sends a CancelRequest.
        Connection c = conn("main");
        SQLException failure = null;
        long began = System.nanoTime();
        try (Statement st = c.createStatement()) {
            ScheduledFuture<?> f = timer.schedule(() -> {
                try {
                    st.cancel();
                } catch (SQLException e) {
                    System.err.println("cancel failed: " + e);
                }
            }, 300, TimeUnit.MILLISECONDS);
            try {
                st.execute("SELECT pg_sleep(30)");
            } catch (SQLException e) {
                failure = e;
            }
            f.cancel(false);
            take("main", st);
        }
        long elapsed = (System.nanoTime() - began) / 1_000_000;
        Map<String, Object> result = map("elapsed_ms", elapsed, "after", scalar("main", "SELECT 40 + ?", 2));
        if (failure != null) {
            throw new StepError(failure, result);
        }
        return result;
    }

    static Map<String, Object> listen(String channel) throws SQLException {
        try (Statement st = conn("listener").createStatement()) {
            st.execute("LISTEN " + channel);
            take("listener", st);
        }
        return map();
    }

    static Map<String, Object> notifyStep(String channel, String payload) throws SQLException {
        Connection c = open("notifier", ENV.get("MATRIX_PORT"), ENV.get("MATRIX_PASSWORD"), null);
        try (Statement st = c.createStatement()) {
            st.execute("NOTIFY " + channel + ", '" + payload.replace("'", "''") + "'");
            take("notifier", st);
        } finally {
            close("notifier");
        }
        return map();
    }

    static List<Object> notifications(PGNotification[] ns) {
        List<Object> out = new ArrayList<>();
        if (ns != null) {
            for (PGNotification n : ns) {
                out.add(map("channel", n.getName(), "payload", n.getParameter()));
            }
        }
        return out;
    }

    static Map<String, Object> waitNotification(int ms) throws SQLException {
        // getNotifications(timeout) blocks on the socket without sending anything.
        PGConnection pc = conn("listener").unwrap(PGConnection.class);
        return map("notifications", notifications(pc.getNotifications(ms)));
    }

    static Map<String, Object> pollNotification() throws SQLException {
        scalar("listener", "SELECT 1");
        PGConnection pc = conn("listener").unwrap(PGConnection.class);
        return map("notifications", notifications(pc.getNotifications()));
    }

    static Map<String, Object> listenerRead(String tag) throws SQLException {
        return map("v", scalar("listener", "SELECT /* " + tag + " */ 1"));
    }

    static Map<String, Object> unlisten() throws SQLException {
        try (Statement st = conn("listener").createStatement()) {
            st.execute("UNLISTEN *");
            take("listener", st);
        }
        return map();
    }

    static Map<String, Object> large(String port, int rows, int width, String closeAfter) throws SQLException {
        // With autocommit off and a fetch size the driver streams through a
        // portal, fetchSize rows per round trip; read-only so that it runs on a standby.
        Connection c = conns.get("large");
        if (c == null) {
            c = open("large", port, ENV.get("MATRIX_PASSWORD"), null);
            c.setAutoCommit(false);
            c.setReadOnly(true);
        }
        long count = 0;
        long bytes = 0;
        long began = System.nanoTime();
        try (Statement st = c.createStatement()) {
            st.setFetchSize(5000);
            try (ResultSet rs = st.executeQuery("SELECT g AS id, repeat('x', " + width + ") AS v FROM generate_series(1, " + rows + ") g")) {
                while (rs.next()) {
                    count++;
                    bytes += rs.getString(2).length();
                }
            }
            take("large", st);
        }
        c.commit();
        long elapsed = (System.nanoTime() - began) / 1_000_000;
        if (closeAfter.equals("close")) {
            close("large");
        }
        return map("rows", count, "bytes", bytes, "elapsed_ms", elapsed);
    }
}

/** Json writes the few value kinds the driver answers with. */
final class Json {
    static String encode(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v);
        return b.toString();
    }

    static void write(StringBuilder b, Object v) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                string(b, String.valueOf(e.getKey()));
                b.append(':');
                write(b, e.getValue());
            }
            b.append('}');
        } else if (v instanceof List<?> l) {
            b.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    b.append(',');
                }
                write(b, l.get(i));
            }
            b.append(']');
        } else if (v instanceof Number || v instanceof Boolean) {
            b.append(v);
        } else {
            string(b, String.valueOf(v));
        }
    }

    static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }
}
