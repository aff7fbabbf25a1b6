# The CPU sidecar of test/gpu/run-pod-runsc.sh: asks the LLM server's HTTP front end (the pod's
# other container, over the sandbox's loopback) every 0.5 s and writes "N ITER S0 S" to
# /out/client.txt (N: its answers so far, then the front end's answer), the last error to
# /out/client.err. Usage: http_client.py PORT
import os
import sys
import time
import urllib.request

url = f'http://127.0.0.1:{sys.argv[1]}/'
n = 0
while True:
    try:
        answer = urllib.request.urlopen(url, timeout=5).read().decode().strip()
        n += 1
        with open('/out/client.txt.tmp', 'w') as f:
            f.write(f'{n} {answer}\n')
        os.replace('/out/client.txt.tmp', '/out/client.txt')
    except Exception as e:
        with open('/out/client.err', 'w') as f:
            f.write(f'{n} {e!r}\n')
    time.sleep(0.5)
