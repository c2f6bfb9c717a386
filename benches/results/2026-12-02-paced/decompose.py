import collections,sys
cl={}
for line in open('client-trace.txt'):
    i,k,s,ns=line.split(); cl[(i,int(k),int(s))]=int(ns)
rows=[]
for line in open('server-trace.txt'):
    r,k,e,a=line.split(); k=int(k); e=int(e); a=int(a)
    try:
        s1=cl[(r,k-1,1)]; s2=cl[(r,k-1,2)]; s3=cl[(r,k-1,3)]; s0=cl[(r,k,0)]
    except KeyError: continue
    rows.append((a-e, s1-e, s2-s1, s3-s2, s0-s3, a-s0, e))
def pct(v,p): v=sorted(v); return v[min(len(v)-1,int(len(v)*p))]/1000
names=['gap','end->head','head->body','parse','runtime','send->arrive']
print(len(rows))
for j,n in enumerate(names):
    v=[r[j] for r in rows]
    print(f"{n:14s} p50 {pct(v,.5):8.1f} p90 {pct(v,.9):8.1f} p99 {pct(v,.99):8.1f} max {max(v)/1000:8.1f} mean {sum(v)/len(v)/1000:7.1f}")
# for the worst 1% gaps, mean of each component
rows.sort(key=lambda r:-r[0])
top=rows[:len(rows)//100]
print('worst 1%:', ' '.join(f"{n}={sum(r[j] for r in top)/len(top)/1000:.1f}" for j,n in enumerate(names)))
# time clustering of worst gaps
t0=min(r[6] for r in rows)
print(sorted(round((r[6]-t0)/1e6) for r in top)[:200])
