// Command nvconformance-logger is a binary:// logging program for containerd shims: the shim
// starts it with the container's stdout on fd 3, its stderr on fd 4 and a pipe on fd 5 that it
// closes once it is ready. Arguments come from the URI's query as "key value" pairs; "file PATH"
// names the file that receives "stdout: LINE" and "stderr: LINE".
package main

import (
	"bufio"
	"fmt"
	"os"
	"sync"
)

func main() {
	path := ""
	for i := 1; i+1 < len(os.Args); i += 2 {
		if os.Args[i] == "file" {
			path = os.Args[i+1]
		}
	}
	if path == "" {
		fmt.Fprintln(os.Stderr, "nvconformance-logger: no file argument")
		os.Exit(2)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nvconformance-logger:", err)
		os.Exit(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for fd, name := range map[uintptr]string{3: "stdout", 4: "stderr"} {
		wg.Add(1)
		go func(in *os.File, name string) {
			defer wg.Done()
			s := bufio.NewScanner(in)
			for s.Scan() {
				mu.Lock()
				fmt.Fprintf(f, "%s: %s\n", name, s.Text())
				mu.Unlock()
			}
		}(os.NewFile(fd, name), name)
	}
	if ready := os.NewFile(5, "ready"); ready != nil {
		ready.Close()
	}
	wg.Wait()
	f.Close()
}
