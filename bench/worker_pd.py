"""Prefill and decode latency of `starcloud worker` split over two processes:
200 prefills, then 200 one-token decodes (each pulls the KV over HTTP).
Usage: worker_pd.py BIN CHECKPOINT"""
import subprocess, sys, time, socket, requests
BIN=sys.argv[1]; ck=sys.argv[2]
def start(*a):
    s=socket.socket(); s.bind(("127.0.0.1",0)); port=s.getsockname()[1]; s.close()
    p=subprocess.Popen([BIN,"worker","--checkpoint",ck,"--listen","127.0.0.1:%d"%port]+list(a),stderr=subprocess.DEVNULL,stdout=subprocess.DEVNULL)
    u="http://127.0.0.1:%d"%port
    for _ in range(100):
        try: requests.get(u+"/v2/health/live",timeout=0.5); break
        except Exception: time.sleep(0.05)
    return p,u
(pp,pu),(dp,du)=start("--role","prefill","--kv-max-handles","1000"),start("--role","decode")
s=requests.Session(); N=200; prompt="Once upon a time, in a land far away, there lived a fox"
t=time.time()
for _ in range(N):
    pre=s.post(pu+"/v1/prefill",json={"prompt":prompt}).json()
t1=time.time()
for _ in range(N):
    s.post(du+"/v1/decode",json={"kv_url":pre["kv_url"],"first_token":pre["first_token"],"max_tokens":1})
t2=time.time()
print("prefill %.2f ms/request (%d tokens); decode incl. KV pull, 1 token: %.2f ms/request" % ((t1-t)/N*1e3, pre["n_tokens"], (t2-t1)/N*1e3))
pp.terminate(); dp.terminate()
