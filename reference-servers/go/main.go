// Reference WebSocket server (Go, gorilla/websocket): see ../PROTOCOL.md.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
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

// workerIndex marks a process started by supervise: its stdout and stdin are pipes to
// the parent.
const workerIndex = "C1M_WORKER_INDEX"

// soReusePort is SO_REUSEPORT on Linux; the syscall package predates it (golang.org/x/sys
// has it, and this build is offline).
const soReusePort = 0xf

// reusePort lets every worker bind the same ports: the kernel spreads connections over
// them.
var reusePort = net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
	var err error
	if e := c.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soReusePort, 1)
	}); e != nil {
		return e
	}
	return err
}}

// supervise runs n workers (this program again, marked by workerIndex) and speaks the
// protocol for them: `listening:` once all listen, SIGUSR1 forwarded to each, their
// `connections:` summed. A worker that ends on its own ends the server, non-zero.
func supervise(n int, host, spec string) {
	exe, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	type line struct {
		worker int
		text   string
	}
	lines := make(chan line)
	ended := make(chan int, n)
	workers := make([]*exec.Cmd, n)
	stdins := make([]io.WriteCloser, n)
	for i := range workers {
		cmd := exec.Command(exe, os.Args[1:]...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", workerIndex, i))
		cmd.Stderr = os.Stderr
		if stdins[i], err = cmd.StdinPipe(); err != nil {
			log.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			log.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		workers[i] = cmd
		go func(i int) {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- line{i, sc.Text()}
			}
			cmd.Wait()
			ended <- i
		}(i)
	}
	// Each worker reads its stdin until EOF: closing it ends the worker.
	stop := func(code int) {
		for _, in := range stdins {
			in.Close()
		}
		deadline := time.After(10 * time.Second)
		for left := n; left > 0; left-- {
			select {
			case <-ended:
			case <-lines:
				left++
			case <-deadline:
				os.Exit(code)
			}
		}
		os.Exit(code)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	counts := make([]int, n)
	listening := 0
	tick := time.NewTicker(2 * time.Second)
	for {
		select {
		case l := <-lines:
			if strings.HasPrefix(l.text, "listening: ") {
				if listening++; listening == n {
					fmt.Printf("listening: %s:%s\n", host, spec)
				}
			} else if strings.HasPrefix(l.text, "connections: ") {
				counts[l.worker], _ = strconv.Atoi(strings.TrimPrefix(l.text, "connections: "))
			}
		case s := <-sigs:
			if s != syscall.SIGUSR1 {
				stop(0)
			}
			for _, w := range workers {
				w.Process.Signal(syscall.SIGUSR1)
			}
		case i := <-ended:
			w := workers[i]
			fmt.Fprintf(os.Stderr, "error: worker %d (pid %d) ended: %s\n", i, w.Process.Pid, w.ProcessState)
			n--
			stop(1)
		case <-tick.C:
			// Counts follow `listening:`, as from one process.
			if listening < n {
				continue
			}
			sum := 0
			for _, c := range counts {
				sum += c
			}
			fmt.Printf("connections: %d\n", sum)
		}
	}
}

func main() {
	host := flag.String("host", env("C1M_HOST", "127.0.0.1"), "listen address")
	spec := flag.String("ports", env("C1M_PORTS", "8000-8099"), "ports: 8000-8099, a list or one")
	certFile := flag.String("tls-cert", env("C1M_TLS_CERT", ""), "PEM certificate chain: serve wss")
	keyFile := flag.String("tls-key", env("C1M_TLS_KEY", ""), "PEM private key of --tls-cert")
	workersFlag := flag.String("workers", env("C1M_WORKERS", "1"), "worker processes, each on every port (SO_REUSEPORT)")
	flag.Parse()
	workers, err := strconv.Atoi(*workersFlag)
	if err != nil || workers < 1 {
		fmt.Fprintf(os.Stderr, "error: --workers %s: give 1 or more\n", *workersFlag)
		os.Exit(2)
	}
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

	_, isWorker := os.LookupEnv(workerIndex)
	if workers > 1 && !isWorker {
		supervise(workers, *host, *spec)
		return
	}
	listen := net.Listen
	if isWorker {
		listen = func(network, addr string) (net.Listener, error) {
			return reusePort.Listen(context.Background(), network, addr)
		}
		// The parent ends its workers (a SIGTERM to the process group reaches both):
		// by closing their stdin, which it also does by exiting.
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
		go func() {
			io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}()
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
		ln, err := listen("tcp", net.JoinHostPort(*host, strconv.Itoa(p)))
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
