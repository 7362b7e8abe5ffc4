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
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketServerProtocolHandler;
import io.netty.util.Version;
import io.netty.util.concurrent.GlobalEventExecutor;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import sun.misc.Signal;

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

    public static void main(String[] args) throws Exception {
        String host = arg(args, "--host", "C1M_HOST", "127.0.0.1");
        String spec = arg(args, "--ports", "C1M_PORTS", "8000-8099");
        // Netty's own record of its jars (META-INF/io.netty.versions.properties).
        Version netty = Version.identify().get("netty-codec-http");
        System.out.println("version: runtime=java@" + System.getProperty("java.version")
                + " library=netty@" + (netty == null ? "unknown" : netty.artifactVersion()));
        EventLoopGroup boss = new NioEventLoopGroup(1);
        EventLoopGroup workers = new NioEventLoopGroup();
        ServerBootstrap b = new ServerBootstrap()
                .group(boss, workers)
                .channel(NioServerSocketChannel.class)
                .childHandler(new ChannelInitializer<SocketChannel>() {
                    @Override
                    protected void initChannel(SocketChannel ch) {
                        ch.pipeline().addLast(
                                new HttpServerCodec(),
                                new HttpObjectAggregator(65536),
                                // "/" with checkStartsWith: every path upgrades.
                                new WebSocketServerProtocolHandler("/", null, false, 65536, false, true),
                                new Echo());
                    }
                });
        for (int port : parsePorts(spec)) {
            b.bind(host, port).sync();
        }
        System.out.println("listening: " + host + ":" + spec);

        Signal.handle(new Signal("USR1"), sig -> {
            Instant now = Instant.now();
            long micros = now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
            // One buffer for all: the group duplicates it per channel.
            CLIENTS.writeAndFlush(new BinaryWebSocketFrame(
                    Unpooled.buffer(8).writeLongLE(micros)));
        });
        workers.next().scheduleAtFixedRate(
                () -> System.out.println("connections: " + CLIENTS.size()), 2, 2, TimeUnit.SECONDS);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boss.shutdownGracefully();
            workers.shutdownGracefully();
        }));
        workers.terminationFuture().sync();
    }
}
