import csv, sys, collections
def load(p):
    lines=[l for l in open(p) if l.startswith('"0x') or l.startswith('"Address"')]
    r=csv.reader(lines); h=next(r); return [dict(zip(h,x)) for x in r]
def n(d,k):
    try: return int(d.get(k) or 0)
    except: return 0
res={}
for p in sys.argv[1:]:
    rows=load(p); c=collections.Counter(); s=collections.Counter()
    for d in rows:
        op=d["Source"].split()[0] if d["Source"] else "?"
        if op.startswith("@"): op=d["Source"].split()[1]
        op=op.split(".")[0]
        c[op]+=n(d,"Instructions Executed"); s[op]+=n(d,"Warp Stall Sampling (All Samples)")
    res[p]=(c,s)
    print(p, "total instr %.0fM samples %d"%(sum(c.values())/1e6, sum(s.values())))
ops=set()
for c,s in res.values(): ops|=set(op for op,_ in c.most_common(25))
print("%-14s"%"op", *["%12s %9s"%("instr(M)","samples") for _ in res])
for op in sorted(ops, key=lambda o:-list(res.values())[-1][0][o]):
    print("%-14s"%op, *["%12.1f %9d"%(c[op]/1e6, s[op]) for c,s in res.values()])
