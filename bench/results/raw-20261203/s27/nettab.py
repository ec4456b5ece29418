import re,sys,glob,collections
for f in sorted(glob.glob(sys.argv[1]+'/net_*.log')):
    lat=collections.defaultdict(list); bw=collections.defaultdict(list)
    for l in open(f):
        if not l.startswith('| emu'): continue
        c=[x.strip() for x in l.split('|')[1:-1]]
        if c[1].endswith('KB'): bw[c[1]].append(float(c[4]))
        else: lat[c[1]].append(float(c[3]))
    name=f.split('/')[-1][4:-4]
    print(name, 'lat', {k:('%.2f-%.2f'%(min(v),max(v))) for k,v in lat.items()})
    print(name, 'bw ', {k:' '.join('%.0f'%x for x in v) for k,v in bw.items()})
    runs=len(bw['256 KB']); ok=sum(1 for i in range(runs) if all(bw[k][i]>=47.5 for k in ['256 KB','1024 KB','4096 KB']))
    print(name, 'runs >=95%% at 256K/1M/4M: %d of %d'%(ok,runs))
