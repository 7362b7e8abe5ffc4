// Reference WebSocket server (Go, gorilla/websocket): see ../PROTOCOL.md.
package main

import (
	"crypto/tls"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// conn serialises writes: gorilla allows one writer at a time, and the echo loop and
// the broadcast both write.
type conn struct {
	ws *websocket.Conn
	mu sync.Mutex
}

func (c *conn) write(kind int, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ws.WriteMessage(kind, data)
}

type hub struct {
	mu    sync.Mutex
	conns map[*conn]struct{}
}

func (h *hub) add(c *conn)    { h.mu.Lock(); h.conns[c] = struct{}{}; h.mu.Unlock() }
func (h *hub) remove(c *conn) { h.mu.Lock(); delete(h.conns, c); h.mu.Unlock() }
func (h *hub) count() int     { h.mu.Lock(); defer h.mu.Unlock(); return len(h.conns) }

func (h *hub) snapshot() []*conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*conn, 0, len(h.conns))
	for c := range h.conns {
		out = append(out, c)
	}
	return out
}

// libraryVersion is gorilla/websocket's version, set at link time by `cargo xtask
// reference-servers` (-X main.libraryVersion=…) from the package the build used: a GOPATH
// build records no module versions in the binary.
var libraryVersion = "unknown"

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func parsePorts(spec string) ([]int, error) {
	var ports []int
	for _, part := range strings.Split(spec, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if found {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, err
			}
		}
		for p := a; p <= b; p++ {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

func env(name, dflt string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return dflt
}

func main() {
	host := flag.String("host", env("C1M_HOST", "127.0.0.1"), "listen address")
	spec := flag.String("ports", env("C1M_PORTS", "8000-8099"), "ports: 8000-8099, a list or one")
	certFile := flag.String("tls-cert", env("C1M_TLS_CERT", ""), "PEM certificate chain: serve wss")
	keyFile := flag.String("tls-key", env("C1M_TLS_KEY", ""), "PEM private key of --tls-cert")
	flag.Parse()
	// Half a TLS configuration is a mistake, not a request for plain ws.
	if (*certFile == "") != (*keyFile == "") {
		given, missing := "--tls-cert", "--tls-key"
		if *certFile == "" {
			given, missing = missing, given
		}
		fmt.Fprintf(os.Stderr, "error: %s missing (%s given; TLS needs both)\n", missing, given)
		os.Exit(2)
	}
	fmt.Printf("version: runtime=go@%s library=gorilla/websocket@%s\n",
		strings.TrimPrefix(runtime.Version(), "go"), libraryVersion)
	ports, err := parsePorts(*spec)
	if err != nil {
		log.Fatalf("--ports %q: %v", *spec, err)
	}

	var tlsConfig *tls.Config
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			log.Fatalf("--tls-cert %s --tls-key %s: %v", *certFile, *keyFile, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		fmt.Println("tls: on")
	}

	h := &hub{conns: map[*conn]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := &conn{ws: ws}
		h.add(c)
		defer func() { h.remove(c); ws.Close() }()
		for {
			kind, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if c.write(kind, data) != nil {
				return
			}
		}
	})
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(p)))
		if err != nil {
			log.Fatal(err)
		}
		if tlsConfig != nil {
			// No ALPN: HTTP/1.1 only, which the upgrade needs.
			ln = tls.NewListener(ln, tlsConfig)
		}
		go func() { log.Print(http.Serve(ln, mux)) }()
	}
	fmt.Printf("listening: %s:%s\n", *host, *spec)

	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(2 * time.Second)
	for {
		select {
		case s := <-sigs:
			if s != syscall.SIGUSR1 {
				return
			}
			stamp := make([]byte, 8)
			binary.LittleEndian.PutUint64(stamp, uint64(time.Now().UnixMicro()))
			for _, c := range h.snapshot() {
				go c.write(websocket.BinaryMessage, stamp)
			}
		case <-tick.C:
			fmt.Printf("connections: %d\n", h.count())
		}
	}
}
