import csv, sys
def load(p):
    lines=[l for l in open(p) if l.startswith('"0x') or l.startswith('"Address"')]
    r=csv.reader(lines); h=next(r); return h,[dict(zip(h,x)) for x in r]
h,rows=load(sys.argv[1]); N=int(sys.argv[2]) if len(sys.argv)>2 else 40
def n(d,k):
    try: return int(d.get(k) or 0)
    except: return 0
reasons=[k for k in h if k.startswith("stall_") and "Not Issued" not in k]
rows2=sorted(rows,key=lambda d:-n(d,"Warp Stall Sampling (All Samples)"))
for d in rows2[:N]:
    rs=sorted(((n(d,k),k[6:]) for k in reasons),reverse=True)[:2]
    print(d["Address"], "%7d"%n(d,"Warp Stall Sampling (All Samples)"), "%10d"%n(d,"Instructions Executed"), d["Source"][:60], rs)
