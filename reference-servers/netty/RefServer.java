// Reference WebSocket server (Java, Netty 4.1, NIO): see ../PROTOCOL.md.

import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.nio.NioChannelOption;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketServerProtocolHandler;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;
import io.netty.handler.ssl.SslProvider;
import io.netty.util.Version;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.net.StandardSocketOptions;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.KeyFactory;
import java.security.PrivateKey;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.concurrent.TimeUnit;
import sun.misc.Signal;
import sun.misc.SignalHandler;

public final class RefServer {
    /** Every open WebSocket; a closed channel leaves the group by itself. */
    static final ChannelGroup CLIENTS = new DefaultChannelGroup(GlobalEventExecutor.INSTANCE);

    /** Echoes data frames; joins the group once the upgrade is done. */
    static final class Echo extends SimpleChannelInboundHandler<WebSocketFrame> {
        @Override
        protected void channelRead0(ChannelHandlerContext ctx, WebSocketFrame frame) {
            if (frame instanceof TextWebSocketFrame || frame instanceof BinaryWebSocketFrame) {
                ctx.writeAndFlush(frame.retain());
            }
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) throws Exception {
            if (evt instanceof WebSocketServerProtocolHandler.HandshakeComplete) {
                CLIENTS.add(ctx.channel());
            }
            super.userEventTriggered(ctx, evt);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            ctx.close();
        }
    }

    /** Marks a JVM started by {@link #supervise}: its stdin and stdout are pipes to it. */
    static final String WORKER_INDEX = "C1M_WORKER_INDEX";

    /** One timestamp, sent to every open WebSocket. */
    static void push() {
        Instant now = Instant.now();
        long micros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
        // One buffer for all: the group duplicates it per channel.
        CLIENTS.writeAndFlush(new BinaryWebSocketFrame(Unpooled.buffer(8).writeLongLE(micros)));
    }

    /**
     * The parent of {@code --workers N}: N JVMs of this class (its own JVM flags, so each
     * gets the heap this one has), each on every port (SO_REUSEPORT). It prints
     * {@code listening:} once all listen, sums their {@code connections:}, and passes
     * SIGUSR1 on as a line on each worker's stdin (Java sends no signal but TERM and
     * KILL). A worker that ends on its own ends the server, exit status 1.
     */
    static void supervise(String[] args, int n, String host, String spec) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse("java"));
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), "RefServer"));
        cmd.addAll(Arrays.asList(args));
        Process[] workers = new Process[n];
        AtomicLongArray counts = new AtomicLongArray(n);
        AtomicInteger listening = new AtomicInteger();
        // Set before any exit of the server: a worker ending then is no news.
        final boolean[] stopping = {false};
        for (int i = 0; i < n; i++) {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
            pb.environment().put(WORKER_INDEX, Integer.toString(i));
            workers[i] = pb.start();
        }
        for (int i = 0; i < n; i++) {
            final int w = i;
            Thread reader = new Thread(() -> {
                Process p = workers[w];
                try (BufferedReader out = new BufferedReader(
                        new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String line; (line = out.readLine()) != null; ) {
                        if (line.startsWith("listening: ") && listening.incrementAndGet() == n) {
                            System.out.println("listening: " + host + ":" + spec);
                        } else if (line.startsWith("connections: ")) {
                            counts.set(w, Long.parseLong(line.substring("connections: ".length())));
                        }
                    }
                    int status = p.waitFor();
                    counts.set(w, 0);
                    synchronized (stopping) {
                        if (stopping[0]) return;
                        // The JVM reports a death by signal as 128 + its number.
                        String how = status > 128 ? "killed by signal " + (status - 128) : "exit status " + status;
                        System.err.println("error: worker " + w + " (pid " + p.pid() + ") ended: " + how);
                    }
                    System.exit(1);
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(1);
                }
            });
            reader.setDaemon(true);
            reader.start();
        }
        Signal.handle(new Signal("USR1"), sig -> {
            for (Process p : workers) {
                try {
                    OutputStream in = p.getOutputStream();
                    in.write("push\n".getBytes(StandardCharsets.US_ASCII));
                    in.flush();
                } catch (Exception e) {
                    // That worker is gone: its reader says so.
                }
            }
        });
        // SIGTERM, SIGINT and System.exit: each worker reads EOF on its stdin and ends.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            synchronized (stopping) {
                stopping[0] = true;
            }
            for (Process p : workers) {
                try {
                    p.getOutputStream().close();
                } catch (Exception e) {
                    // Gone already.
                }
            }
            for (Process p : workers) {
                try {
                    p.waitFor(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }));
        while (true) {
            Thread.sleep(2000);
            // Counts follow `listening:`, as from one process.
            if (listening.get() < n) continue;
            long sum = 0;
            for (int i = 0; i < n; i++) sum += counts.get(i);
            System.out.println("connections: " + sum);
        }
    }

    static List<Integer> parsePorts(String spec) {
        List<Integer> ports = new ArrayList<>();
        for (String part : spec.split(",")) {
            String[] r = part.split("-");
            int lo = Integer.parseInt(r[0]);
            int hi = r.length > 1 ? Integer.parseInt(r[1]) : lo;
            for (int p = lo; p <= hi; p++) ports.add(p);
        }
        return ports;
    }

    static String arg(String[] args, String name, String env, String dflt) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals(name)) return args[i + 1];
        }
        String v = System.getenv(env);
        return v != null && !v.isEmpty() ? v : dflt;
    }

    /** One DER element: tag, length, body. */
    static byte[] der(int tag, byte[]... parts) {
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        for (byte[] p : parts) body.writeBytes(p);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        out.write(tag);
        int n = body.size();
        if (n < 0x80) {
            out.write(n);
        } else {
            int bytes = n > 0xffffff ? 4 : n > 0xffff ? 3 : n > 0xff ? 2 : 1;
            out.write(0x80 | bytes);
            for (int i = bytes - 1; i >= 0; i--) out.write(n >>> (8 * i));
        }
        out.writeBytes(body.toByteArray());
        return out.toByteArray();
    }

    /** The elements inside a DER SEQUENCE, each whole (tag and length included). */
    static List<byte[]> derElements(byte[] seq) {
        List<byte[]> out = new ArrayList<>();
        int i = headerLength(seq, 0);
        while (i < seq.length) {
            int h = headerLength(seq, i);
            int end = i + h + bodyLength(seq, i);
            out.add(java.util.Arrays.copyOfRange(seq, i, end));
            i = end;
        }
        return out;
    }

    static int headerLength(byte[] d, int at) {
        int l = d[at + 1] & 0xff;
        return l < 0x80 ? 2 : 2 + (l & 0x7f);
    }

    static int bodyLength(byte[] d, int at) {
        int l = d[at + 1] & 0xff;
        if (l < 0x80) return l;
        int n = 0;
        for (int k = 0; k < (l & 0x7f); k++) n = (n << 8) | (d[at + 2 + k] & 0xff);
        return n;
    }

    static final Pattern PEM_KEY = Pattern.compile(
            "-----BEGIN (RSA|EC) PRIVATE KEY-----([A-Za-z0-9+/=\\s]+)-----END \\1 PRIVATE KEY-----");

    /**
     * A PKCS#1 (RSA) or SEC1 (EC) key, or null when the file holds neither. Netty 4.1.48
     * reads only PKCS#8 without BouncyCastle: these are wrapped into PKCS#8 here.
     */
    static PrivateKey traditionalKey(File keyFile) throws Exception {
        Matcher m = PEM_KEY.matcher(Files.readString(keyFile.toPath()));
        if (!m.find()) return null;
        byte[] inner = Base64.getMimeDecoder().decode(m.group(2));
        byte[] version = {0x02, 0x01, 0x00};
        byte[] algorithm;
        if (m.group(1).equals("RSA")) {
            byte[] rsa = {0x06, 0x09, 0x2a, (byte) 0x86, 0x48, (byte) 0x86, (byte) 0xf7, 0x0d, 0x01, 0x01, 0x01};
            algorithm = der(0x30, rsa, new byte[] {0x05, 0x00});
        } else {
            // SEC1 names its curve in [0]; PKCS#8 names it in the algorithm.
            byte[] curve = derElements(inner).stream()
                    .filter(e -> (e[0] & 0xff) == 0xa0)
                    .findFirst()
                    .map(e -> java.util.Arrays.copyOfRange(e, headerLength(e, 0), e.length))
                    .orElseThrow(() -> new IllegalArgumentException(keyFile + ": EC key names no curve"));
            byte[] ec = {0x06, 0x07, 0x2a, (byte) 0x86, 0x48, (byte) 0xce, 0x3d, 0x02, 0x01};
            algorithm = der(0x30, ec, curve);
        }
        byte[] pkcs8 = der(0x30, version, algorithm, der(0x04, inner));
        return KeyFactory.getInstance(m.group(1)).generatePrivate(new PKCS8EncodedKeySpec(pkcs8));
    }

    static SslContext sslContext(String cert, String key) throws Exception {
        File certFile = new File(cert);
        File keyFile = new File(key);
        PrivateKey traditional = traditionalKey(keyFile);
        SslContextBuilder b;
        if (traditional == null) {
            b = SslContextBuilder.forServer(certFile, keyFile);
        } else {
            List<X509Certificate> chain = new ArrayList<>();
            try (InputStream in = new FileInputStream(certFile)) {
                for (var c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                    chain.add((X509Certificate) c);
                }
            }
            b = SslContextBuilder.forServer(traditional, chain.toArray(new X509Certificate[0]));
        }
        return b.sslProvider(SslProvider.JDK).protocols("TLSv1.3", "TLSv1.2").build();
    }

    public static void main(String[] args) throws Exception {
        String host = arg(args, "--host", "C1M_HOST", "127.0.0.1");
        String spec = arg(args, "--ports", "C1M_PORTS", "8000-8099");
        String cert = arg(args, "--tls-cert", "C1M_TLS_CERT", "");
        String key = arg(args, "--tls-key", "C1M_TLS_KEY", "");
        // Half a TLS configuration is a mistake, not a request for plain ws.
        if (cert.isEmpty() != key.isEmpty()) {
            String given = cert.isEmpty() ? "--tls-key" : "--tls-cert";
            String missing = cert.isEmpty() ? "--tls-cert" : "--tls-key";
            System.err.println("error: " + missing + " missing (" + given + " given; TLS needs both)");
            System.exit(2);
        }
        String workersArg = arg(args, "--workers", "C1M_WORKERS", "1");
        int workerCount;
        try {
            workerCount = Integer.parseInt(workersArg);
        } catch (NumberFormatException e) {
            workerCount = 0;
        }
        if (workerCount < 1) {
            System.err.println("error: --workers " + workersArg + ": give 1 or more");
            System.exit(2);
        }
        boolean worker = System.getenv(WORKER_INDEX) != null;
        // Netty's own record of its jars (META-INF/io.netty.versions.properties).
        Version netty = Version.identify().get("netty-codec-http");
        System.out.println("version: runtime=java@" + System.getProperty("java.version")
                + " library=netty@" + (netty == null ? "unknown" : netty.artifactVersion()));
        SslContext ssl = null;
        if (!cert.isEmpty()) {
            ssl = sslContext(cert, key);
            System.out.println("tls: on");
        }
        final SslContext tls = ssl;
        if (workerCount > 1 && !worker) {
            supervise(args, workerCount, host, spec);
            return;
        }
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup();
        ServerBootstrap b = new ServerBootstrap()
                .group(boss, workers)
                .channel(NioServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        if (tls != null) ch.pipeline().addLast(tls.newHandler(ch.alloc()));
                        ch.pipeline().addLast(
                                new HttpServerCodec(),
                                new HttpObjectAggregator(65536),
                                // "/" with checkStartsWith: every path upgrades.
                                new WebSocketServerProtocolHandler("/", null, false, 65536, false, true),
                                new Echo());
                    }
                });
        if (worker) {
            // Every worker binds every port: the kernel spreads connections over them.
            b.option(NioChannelOption.of(StandardSocketOptions.SO_REUSEPORT), true);
        }
        for (int port : parsePorts(spec)) {
            b.bind(host, port).sync();
        }
        System.out.println("listening: " + host + ":" + spec);

        Signal.handle(new Signal("USR1"), sig -> push());
        if (worker) {
            // The parent ends its workers (a SIGTERM to the process group reaches both) by
            // closing their stdin, which its exit does too; a line "push" is its SIGUSR1.
            Signal.handle(new Signal("TERM"), SignalHandler.SIG_IGN);
            Signal.handle(new Signal("INT"), SignalHandler.SIG_IGN);
            Thread parent = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII))) {
                    for (String line; (line = in.readLine()) != null; ) {
                        if (line.equals("push")) push();
                    }
                } catch (Exception e) {
                    // As good as EOF.
                }
                System.exit(0);
            });
            parent.setDaemon(true);
            parent.start();
        }
        workers.next().scheduleAtFixedRate(
                () -> System.out.println("connections: " + CLIENTS.size()), 2, 2, TimeUnit.SECONDS);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boss.shutdownGracefully();
            workers.shutdownGracefully();
        }));
        workers.terminationFuture().sync();
    }
}
