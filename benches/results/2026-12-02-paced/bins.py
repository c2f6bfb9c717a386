import collections
cl={}
rows=[]
for line in open('server-trace.txt'):
    r,k,e,a=line.split(); rows.append((int(e),int(a)-int(e)))
t0=min(e for e,g in rows)
b=collections.defaultdict(list)
for e,g in rows: b[(e-t0)//100_000_000].append(g)
for k in sorted(b):
    v=sorted(b[k]); n=len(v)
    print(f"{k/10:5.1f}s n={n:4d} p50={v[n//2]/1000:7.0f} p99={v[int(n*.99)]/1000:7.0f} max={v[-1]/1000:7.0f}")
